"""confluent-kafka-python's own integration tests (``tests/integration``) against a floodmark
cluster, in the suite's bring-your-own-cluster mode (``BROKERS`` set: no trivup cluster).

    python -m tests.reference.confluent_python_suite --source DIR [--brokers 3] [-k EXPR]
                                                     [--json] [--data-dir D]

``--source`` is a checkout of confluent-kafka-python (its ``tests/`` and ``requirements/`` are
used; the wheel under test is the confluent-kafka the project pins, installed into the suite's own
virtualenv with the suite's test requirements, cached under
``~/.cache/floodmark/confluent-kafka-python``). PyPI's sdist carries no tests, so the sources
come from a checkout; ``CONFLUENT_KAFKA_PYTHON_SRC`` may name it instead of ``--source``.

Left out, each for a stated reason: ``schema_registry`` (needs a Schema Registry; none runs
here) and the ``share_consumer_sasl`` / ``share_consumer_oauth`` modules (they start trivup's
own SASL/OAUTHBEARER Kafka, which needs Kafka's tarball from the internet). Everything else
runs against a local floodmark cluster (``floodmark cluster up --detach``) with each test bounded
by ``--timeout-s``. Prints passed / failed / skipped with each failure's first line; exit 1 when
a test failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.reference.suite_cluster import detached_cluster, report

CACHE = (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "floodmark"
         / "confluent-kafka-python")
LEFT_OUT = {
    "tests/integration/schema_registry": "needs a Schema Registry",
    "tests/integration/share_consumer_sasl": "starts trivup's own SASL Kafka (internet)",
    "tests/integration/share_consumer_oauth": "starts trivup's own OAUTHBEARER Kafka (internet)",
    "-k sasl_cluster": "tests parametrised with trivup's own SASL Kafka (internet)",
}
# What trivup's Kafka runs with for this suite (its server.properties template and the suite's
# broker_conf): an authorizer allowing everyone where no ACL is found (the ACL tests need one),
# Kafka's 4 partitions a new topic, share groups on (Kafka 4.2's default) with a 1 s lock (and
# the same 1 s as the floor of a group's own share.record.lock.duration.ms, as trivup sets it).
TRIVUP_SETTINGS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found=true", "super.users=User:admin", "num.partitions=4",
    "group.share.enable=true", "group.share.record.lock.duration.ms=1000",
    "group.share.min.record.lock.duration.ms=1000",
)
# The suite's test requirements that are formatters/linters, not needed to run it.
NOT_NEEDED = ("flake8", "mypy", "black", "isort", "pytest_cov", "types-")


def installed_confluent_kafka() -> str:
    from importlib.metadata import version

    return version("confluent-kafka")


def suite_python(source: Path) -> Path:
    """The suite's virtualenv: the project's confluent-kafka version plus the suite's test
    requirements (made once per version)."""
    version = installed_confluent_kafka()
    venv = CACHE / f"venv-{version}"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    reqs: list[str] = []
    wanted = ("requirements-tests.txt", "requirements-schemaregistry.txt",
              "requirements-avro.txt", "requirements-json.txt", "requirements-protobuf.txt")
    for name in wanted:
        path = source / "requirements" / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-r") and not line.startswith(NOT_NEEDED):
                reqs.append(line)
    trivup = sorted((source / "tests" / "trivup").glob("trivup-*.tar.gz"))
    print(f"installing confluent-kafka {version} and the suite's requirements into {venv} "
          "(once)...", file=sys.stderr)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"confluent-kafka=={version}",
                    *reqs, *(str(t) for t in trivup[-1:])], check=True)
    return python


def run(args: argparse.Namespace) -> int:
    source = Path(args.source or os.environ.get("CONFLUENT_KAFKA_PYTHON_SRC", "")).resolve()
    if not (source / "tests" / "integration" / "conftest.py").exists():
        raise SystemExit("--source must be a checkout of confluent-kafka-python (with "
                         "tests/integration); PyPI's sdist has no tests")
    python = suite_python(source)
    with tempfile.TemporaryDirectory(prefix="ckp-suite-") as tmp:
        data = args.data_dir or str(Path(tmp) / "cluster")
        junit = Path(tmp) / "junit.xml"
        settings = [a for kv in TRIVUP_SETTINGS for a in ("--set", kv, "--controller-set", kv)]
        with detached_cluster(data, args.brokers, settings) as brokers:
            cmd = [str(python), "-m", "pytest", "tests/integration", "-q", "-p",
                   "no:cacheprovider", f"--timeout={args.timeout_s}", f"--junitxml={junit}",
                   *(f"--ignore={p}" for p in LEFT_OUT if p.startswith("tests/"))]
            # Tests taking trivup's own SASL cluster as a parameter (it downloads Kafka).
            selection = "not sasl_cluster"
            cmd += ["-k", f"({args.k}) and {selection}" if args.k else selection]
            test_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            test_env.update({"BROKERS": brokers, "PYTHONPATH": str(source)})
            done = subprocess.run(cmd, cwd=source, env=test_env, capture_output=True, text=True)
        if not junit.exists():
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
            raise SystemExit("the suite did not run (no junit report)")
        results = parse(junit)
    return report(results, f"confluent-kafka-python {installed_confluent_kafka()} "
                           f"tests/integration on {args.brokers} floodmark broker(s)",
                  {"confluent_kafka": installed_confluent_kafka(), "brokers": args.brokers},
                  LEFT_OUT, args.json)


def parse(report: Path) -> dict[str, tuple[str, str]]:
    """junit XML -> {test id: (passed|failed|skipped, first line of the failure)}."""
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            message = (failure.get("message") or failure.text or "").strip().splitlines()
            out[name] = ("failed", message[0] if message else "")
        elif case.find("skipped") is not None:
            out[name] = ("skipped", "")
        else:
            out[name] = ("passed", "")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", default=None,
                   help="a checkout of confluent-kafka-python (or CONFLUENT_KAFKA_PYTHON_SRC)")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("-k", default=None, help="only tests matching this pytest -k expression")
    p.add_argument("--timeout-s", type=int, default=120, help="per test (pytest-timeout)")
    p.add_argument("--data-dir", default=None,
                   help="the cluster's directory (kept afterwards, with its logs)")
    p.add_argument("--json", action="store_true")
    return run(p.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
