"""franz-go's own integration tests (``pkg/kgo``) against a floodmark cluster: the Go client's
author runs them against Kafka and Redpanda; here they run against floodmark.

    python -m tests.reference.franz_go_suite [--brokers 3] [--records 20000] [--run REGEX]
                                             [--version v1.22.3] [--json]

Fetches the pinned franz-go release from the Go module proxy (``go mod download``), builds its
``pkg/kgo`` test binary once (cached under ``~/.cache/floodmark/franz-go``, beside the sources some tests read), starts a local
floodmark cluster (``floodmark cluster up --detach``), runs the binary with ``KGO_SEEDS`` set to
the cluster (``KGO_TEST_RF`` = the broker count, ``KGO_TEST_RECORDS`` bounding the ETL tests),
stops the cluster, and prints passed/failed/skipped with each failure's first line. Tests that
need what the cluster does not offer skip themselves (SCRAM, OAUTHBEARER seeds, share groups).
Exit status 1 when a test failed. The build takes minutes on a loaded 2-core machine; the run
about ten.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.reference.suite_cluster import detached_cluster

DEFAULT_VERSION = "v1.22.3"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "floodmark" / "franz-go"
RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+) ")


def test_binary(version: str) -> Path:
    """The ``pkg/kgo`` test binary of franz-go ``version``, built once beside its sources
    (some tests read them: run it from its directory)."""
    source = CACHE / f"franz-go-{version}"
    binary = source / "pkg" / "kgo" / "kgo.test"
    if binary.exists():
        return binary
    if shutil.which("go") is None:
        raise SystemExit("franz-go's suite needs `go` on PATH")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["go", "mod", "init", "franzgosuite"], cwd=work, check=True,
                       capture_output=True)
        out = subprocess.run(["go", "mod", "download", "-json",
                              f"github.com/twmb/franz-go@{version}"], cwd=work, check=True,
                             capture_output=True, text=True)
        module = Path(json.loads(out.stdout)["Dir"])
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(module, source)
    for p in source.rglob("*"):
        p.chmod(p.stat().st_mode | 0o200)
    print(f"building franz-go {version}'s pkg/kgo tests (minutes)...", file=sys.stderr)
    subprocess.run(["go", "test", "-c", "-o", str(binary), "."], cwd=binary.parent, check=True)
    return binary


def run(args: argparse.Namespace) -> int:
    binary = test_binary(args.version)
    with tempfile.TemporaryDirectory(prefix="franz-go-") as tmp, \
            detached_cluster(args.data_dir or tmp, args.brokers) as seeds:
        test_env = {**os.environ, "KGO_SEEDS": seeds, "KGO_TEST_RF": str(args.brokers),
                    "KGO_TEST_RECORDS": str(args.records), "KGO_LOG_LEVEL": "none"}
        cmd = [str(binary), "-test.v", "-test.timeout", f"{args.timeout_m}m"]
        if args.run:
            cmd += ["-test.run", args.run]
        done = subprocess.run(cmd, env=test_env, capture_output=True, text=True,
                              cwd=binary.parent)
    results: dict[str, str] = {}
    first_error: dict[str, str] = {}
    pending: list[str] = []
    for line in done.stdout.splitlines():
        m = RESULT.match(line)
        if m:
            results[m.group(2)] = m.group(1)
            if m.group(1) == "FAIL" and pending:
                first_error[m.group(2)] = pending[0]
            pending = []
        elif re.match(r"^\s+\S+_test\.go:\d+:", line):
            pending.append(line.strip())
    counts = {k: sum(1 for v in results.values() if v == k) for k in ("PASS", "FAIL", "SKIP")}
    if args.json:
        print(json.dumps({"version": args.version, "brokers": args.brokers, **counts,
                          "failed": {t: first_error.get(t, "") for t, v in results.items()
                                     if v == "FAIL"}}))
    else:
        print(f"franz-go {args.version} pkg/kgo on {args.brokers} floodmark broker(s): "
              f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
        for t, v in sorted(results.items()):
            if v == "FAIL":
                print(f"  FAIL {t}: {first_error.get(t, '')[:200]}")
    return 1 if counts["FAIL"] or done.returncode not in (0, 1) else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--version", default=DEFAULT_VERSION)
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--records", type=int, default=20_000,
                   help="KGO_TEST_RECORDS: records per ETL test (franz-go's default 500,000)")
    p.add_argument("--run", default=None, help="only tests matching this regex (go test -run)")
    p.add_argument("--timeout-m", type=int, default=30)
    p.add_argument("--data-dir", default=None,
                   help="the cluster's directory (kept afterwards, with its logs); default: a "
                        "temporary one")
    p.add_argument("--json", action="store_true")
    return run(p.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
