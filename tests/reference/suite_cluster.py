"""A detached local floodmark cluster for the other clients' own suites (franz-go's,
confluent-kafka-python's): ``floodmark cluster up --detach`` with Kafka's 9 s broker session (the
local default of 2 s fences brokers of a machine such a suite loads, which is not what it
measures), its bootstrap from ``cluster status --json``, ``cluster down`` at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def detached_cluster(data_dir: str, brokers: int, extra: Sequence[str] = ()) -> Iterator[str]:
    """Start the cluster in ``data_dir`` (``extra``: more ``cluster up`` arguments) and yield
    its bootstrap address; stop it however the block ends."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    floodmark = [sys.executable, "-m", "floodmark.cli"]
    subprocess.run([*floodmark, "cluster", "up", "--detach", "--brokers", str(brokers),
                    "--controller-set", "broker.session.timeout.ms=9000", *extra,
                    "--data-dir", data_dir], check=True, env=env, capture_output=True)
    try:
        status = subprocess.run([*floodmark, "cluster", "status", "--json", "--data-dir",
                                 data_dir], check=True, env=env, capture_output=True, text=True)
        yield str(json.loads(status.stdout)["bootstrap"])
    finally:
        subprocess.run([*floodmark, "cluster", "down", "--data-dir", data_dir], env=env,
                       capture_output=True)


def report(results: dict[str, tuple[str, str]], headline: str, fields: dict[str, object],
           left_out: dict[str, str], as_json: bool) -> int:
    """Print a suite's outcome (one JSON object, or ``headline`` with the counts, each failure
    and what was left out) and return the exit code: 1 when a test failed."""
    counts = {k: sum(1 for v, _ in results.values() if v == k)
              for k in ("passed", "failed", "skipped")}
    failed = {t: why for t, (v, why) in results.items() if v == "failed"}
    if as_json:
        print(json.dumps({**fields, **counts, "failed": failed, "left_out": left_out}))
    else:
        print(f"{headline}: {counts['passed']} passed, {counts['failed']} failed, "
              f"{counts['skipped']} skipped")
        for t, why in sorted(failed.items()):
            print(f"  FAIL {t}: {why[:240]}")
        for path, why in left_out.items():
            print(f"  left out {path}: {why}")
    return 1 if counts["failed"] else 0
