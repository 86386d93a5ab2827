"""kafka-python's own integration tests (``test/integration``) against a floodmark cluster, in
the suite's external-broker mode (``KAFKA_URI`` set: its fixtures use that broker instead of
starting Kafka from a release tarball).

    python -m tests.reference.kafka_python_suite --source DIR [--brokers 1] [-k EXPR]
                                                 [--json] [--data-dir D] [--against kafka]

``--source`` is a checkout of kafka-python (its ``test/`` and pytest settings are used; PyPI's
sdist carries no tests); ``KAFKA_PYTHON_SRC`` may name it instead. The client under test is the
kafka-python the project pins (this interpreter's), not the checkout's ``kafka/``: the suite's
``test/`` package is copied into a scratch directory and run from there, so the checkout's
sources never shadow the installed client. ``KAFKA_VERSION`` is the Kafka release whose API set
floodmark advertises (docs/wire.md), which the suite hands the clients as ``api_version`` and
uses to pick its version-dependent checks.

``--against kafka`` runs the same tests on the real Apache Kafka instead (``./dev kafka``'s
KRaft nodes, same settings), to tell "fails everywhere" from "fails here". One broker by
default, as the suite's own Kafka: several of its tests assume one (a replica on node 0, all
partitions answered in one fetch).

Left out, each for a stated reason: ``test_ssl_integration.py`` (its fixture always starts its
own SSL Kafka from a tarball's ``bin/`` scripts, even with ``KAFKA_URI``); the SASL module skips
itself with ``KAFKA_URI`` (it needs brokers started with SCRAM users). The cluster runs with the
broker settings the suite's own Kafka gets (its ``servers/resources/default/kafka.properties`` and
``_acl_config``): an authorizer that allows everyone where no ACL is found, 4 partitions a topic,
a 1 s minimum group session and no initial rebalance delay. Each test is bounded by
``--timeout-s``. Prints passed / failed / skipped with each failure's first line; exit 1 when a
test failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.reference.confluent_python_suite import parse
from tests.reference.suite_cluster import detached_cluster, report

# The Kafka release whose API versions floodmark advertises (docs/wire.md).
KAFKA_VERSION = "4.1.1"
LEFT_OUT = {
    "test/integration/test_ssl_integration.py":
        "its fixture starts its own SSL Kafka from a tarball's bin/ scripts (no external mode)",
}
# What kafka-python's Kafka runs with (servers/resources/default/kafka.properties, _acl_config).
SUITE_SETTINGS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found=true", "num.partitions=4",
    "group.min.session.timeout.ms=1000", "group.initial.rebalance.delay.ms=0",
)


def installed_kafka_python() -> str:
    from importlib.metadata import version

    return version("kafka-python")


def scratch_copy(source: Path, into: Path) -> Path:
    """The suite's ``test/`` package and pytest settings in ``into`` (no ``kafka/`` beside
    them, so ``import kafka`` finds the installed client)."""
    shutil.copytree(source / "test", into / "test")
    shutil.copy(source / "pyproject.toml", into / "pyproject.toml")
    return into


@contextmanager
def cluster(against: str, data_dir: str, brokers: int) -> Iterator[str]:
    """A cluster with the suite's broker settings; yields its bootstrap address."""
    if against == "kafka":
        from tests.reference.kafka_node import kafka_cluster

        # Kafka's nodes talk to each other as User:ANONYMOUS over PLAINTEXT, and its
        # StandardAuthorizer refuses them until it has loaded the ACLs
        # (AuthorizerNotReadyException: a 3-node quorum never forms without this).
        overrides = {**dict(kv.split("=", 1) for kv in SUITE_SETTINGS),
                     "super.users": "User:ANONYMOUS"}
        with kafka_cluster(Path(data_dir), brokers, overrides) as kafka:
            yield kafka.bootstrap
        return
    settings = [a for kv in SUITE_SETTINGS for a in ("--set", kv, "--controller-set", kv)]
    with detached_cluster(data_dir, brokers, settings) as bootstrap:
        yield bootstrap


def run(args: argparse.Namespace) -> int:
    source = Path(args.source or os.environ.get("KAFKA_PYTHON_SRC", "")).resolve()
    if not (source / "test" / "integration" / "fixtures.py").exists():
        raise SystemExit("--source must be a checkout of kafka-python (with test/integration); "
                         "PyPI's sdist has no tests")
    with tempfile.TemporaryDirectory(prefix="kpy-suite-") as tmp:
        suite = scratch_copy(source, Path(tmp) / "suite")
        data = args.data_dir or str(Path(tmp) / "cluster")
        junit = Path(tmp) / "junit.xml"
        with cluster(args.against, data, args.brokers) as brokers:
            first = brokers.split(",")[0]
            cmd = [sys.executable, "-m", "pytest", "test/integration", "-q", "-p",
                   "no:cacheprovider", "-o", "log_level=WARNING",
                   f"--timeout={args.timeout_s}", f"--junitxml={junit}",
                   *(f"--ignore={p}" for p in LEFT_OUT)]
            if args.k:
                cmd += ["-k", args.k]
            test_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            test_env.update({
                "PYTHONPATH": str(suite),
                "KAFKA_VERSION": KAFKA_VERSION,
                "KAFKA_URI": f"PLAINTEXT://{first}",
                # Its fixture checks that a Kafka installation directory exists even in
                # external mode; nothing in it is run.
                "KAFKA_ROOT": str(suite),
            })
            done = subprocess.run(cmd, cwd=suite, env=test_env, capture_output=True, text=True)
        if not junit.exists():
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
            raise SystemExit("the suite did not run (no junit report)")
        results = parse(junit)
    return report(results, f"kafka-python {installed_kafka_python()} test/integration on "
                           f"{args.brokers} {args.against} broker(s)",
                  {"kafka_python": installed_kafka_python(), "against": args.against,
                   "brokers": args.brokers}, LEFT_OUT, args.json)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", default=None,
                   help="a checkout of kafka-python (or KAFKA_PYTHON_SRC)")
    p.add_argument("--brokers", type=int, default=1)
    p.add_argument("--against", choices=("floodmark", "kafka"), default="floodmark",
                   help="the cluster the suite runs on (kafka: ./dev kafka's real Kafka)")
    p.add_argument("-k", default=None, help="only tests matching this pytest -k expression")
    p.add_argument("--timeout-s", type=int, default=120, help="per test (pytest-timeout)")
    p.add_argument("--data-dir", default=None,
                   help="the cluster's directory (kept afterwards, with its logs)")
    p.add_argument("--json", action="store_true")
    return run(p.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
