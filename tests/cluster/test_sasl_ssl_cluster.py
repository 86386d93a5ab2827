"""``floodmark cluster up --security sasl_ssl`` (issue 21's contract) on real processes: client
listeners SASL_SSL with SCRAM-SHA-512, internal channels mTLS; ``D/client.properties`` holds the
admin's settings in librdkafka's names, and ``cluster status --json`` gives the listener as
``bootstrap``. The admin's password is made at random, kept 0600, and is on no command line."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import replicated_round_trip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("sasl-ssl") / "cluster", brokers=2,
                     security="sasl_ssl").start()
    yield c
    c.stop()


def _props(data_dir: Path) -> dict[str, str]:
    return dict(line.split("=", 1)
                for line in (data_dir / "client.properties").read_text().splitlines())


def test_admin_produces_and_consumes_over_sasl_ssl(cluster: LocalCluster) -> None:
    props = _props(cluster.data_dir)
    assert set(props) == {"security.protocol", "sasl.mechanisms", "sasl.username",
                          "sasl.password", "ssl.ca.location"}
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanisms"] == "SCRAM-SHA-512" and props["sasl.username"] == "admin"
    for path in (cluster.data_dir / "client.properties",
                 cluster.data_dir / "tls" / "admin.password"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The contract: `cluster status --json --data-dir D` gives the listener as `bootstrap`.
    out = subprocess.run([sys.executable, "-m", "floodmark.cli", "cluster", "status", "--json",
                          "--data-dir", str(cluster.data_dir)], capture_output=True, text=True,
                         check=True, timeout=120)
    status = json.loads(out.stdout)
    assert status["bootstrap"] == cluster.bootstrap and status["security"] == "sasl_ssl"
    conf = {"bootstrap.servers": status["bootstrap"], **props}
    topic = f"sasl-{uuid.uuid4().hex[:6]}"
    # acks=all, min.insync.replicas=2: the follower fetched over mTLS
    replicated_round_trip(conf, topic, b"v" * 512, {"enable.idempotence": True})
    # The CLI finds the client settings in the data dir.
    listed = subprocess.run([sys.executable, "-m", "floodmark.cli", "topic", "list",
                             "--data-dir", str(cluster.data_dir)], capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr


def test_a_wrong_password_is_refused_and_the_password_is_on_no_command_line(
        cluster: LocalCluster) -> None:
    props = _props(cluster.data_dir)
    errors: list[str] = []
    bad = Producer({"bootstrap.servers": cluster.bootstrap, **props, "sasl.password": "wrong",
                    "message.timeout.ms": 5000, "error_cb": lambda e: errors.append(e.name())})
    outcome: list[KafkaError | None] = []
    bad.produce("anything", b"x", on_delivery=lambda e, _m: outcome.append(e))
    bad.flush(20)
    assert "_AUTHENTICATION" in errors
    assert outcome and outcome[0] is not None  # not delivered
    password = props["sasl.password"]
    for node_id in cluster.node_ids:
        pid = cluster.pid(node_id)
        if pid:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            assert password not in cmdline
    for log in (cluster.data_dir / "logs").glob("*.log"):
        assert password not in log.read_text(errors="replace")


def _cli(cluster: LocalCluster, *args: str, stdin: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark.cli", *args, "--data-dir",
                           str(cluster.data_dir)], capture_output=True, text=True, timeout=120,
                          input=stdin)


def test_the_secured_cluster_authorizes_a_user_by_acls(cluster: LocalCluster) -> None:
    """The authorizer is on: a new SCRAM user may do nothing until an ACL says so; the admin
    (a super user) grants it with ``floodmark acl add``; the nodes (super users through their
    certificates) keep replicating (acks=all above)."""
    made = _cli(cluster, "user", "scram", "set", "carol", "--password", "-",
                "--mechanism", "SCRAM-SHA-512", stdin="carol-secret\n")
    assert made.returncode == 0, made.stdout + made.stderr
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    created = _cli(cluster, "topic", "create", topic, "--replication-factor", "2")
    assert created.returncode == 0, created.stdout + created.stderr
    conf = {"bootstrap.servers": cluster.bootstrap, **_props(cluster.data_dir),
            "sasl.username": "carol", "sasl.password": "carol-secret",
            "message.timeout.ms": 10000}

    def produce() -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        p = Producer(conf)
        p.produce(topic, b"v", on_delivery=lambda e, _m: outcome.append(e))
        p.flush(20)
        assert outcome, "no delivery report"
        return outcome[0]
    refused = produce()
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    granted = _cli(cluster, "acl", "add", "--allow-principal", "User:carol",
                   "--operation", "Write", "--operation", "Describe", "--topic", topic)
    assert granted.returncode == 0, granted.stdout + granted.stderr
    assert produce() is None
