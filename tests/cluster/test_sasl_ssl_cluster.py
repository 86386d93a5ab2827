"""``floodmark cluster up --security sasl_ssl`` (issue 21's contract) on real processes: client
listeners SASL_SSL with SCRAM-SHA-512; the inter-broker listener SASL_SSL with SCRAM-SHA-512 too
(the brokers log in as ``floodmark-node``, with their certificates), the controller channel
mTLS; ``D/client.properties`` holds the admin's settings in librdkafka's names, and ``cluster
status --json`` gives the listener as ``bootstrap``. The passwords are made at random, kept
0600, and are on no command line."""

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

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.cluster import LocalCluster
from floodmark.cluster.secure import NODE_USER
from floodmark.controller import rpc
from floodmark.security.client_security import ClientSecurity
from floodmark.security.listeners import SecurityProtocol
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
    passwords = [props["sasl.password"],
                 (cluster.data_dir / "tls" / f"{NODE_USER}.password").read_text().strip()]
    for node_id in cluster.node_ids:
        pid = cluster.pid(node_id)
        if pid:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            assert not any(p in cmdline for p in passwords)
    for log in (cluster.data_dir / "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        assert not any(p in text for p in passwords)


def _fetch(conn: KafkaConnection, replica_id: int) -> int:
    r = conn.request(1, 12, {
        "replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "__consumer_offsets", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return int(r.error_code)


def test_brokers_log_in_to_each_other_with_scram(cluster: LocalCluster) -> None:
    """The INTERNAL listener is SASL_SSL: a node certificate alone no longer fetches; the node
    certificate and the ``floodmark-node`` login do. The JAAS entry comes from a 0600 file."""
    sec = cluster.security
    assert sec is not None
    jaas_file = sec.inter_broker_config_path
    assert stat.S_IMODE(jaas_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(sec.password_path(NODE_USER).stat().st_mode) == 0o600
    status = rpc.blocking_call(cluster.controller_address, "status", {}, 5.0,
                               cluster.channel_security)
    brokers = status["result"]["brokers"]
    internal = next(ep for ep in brokers[0]["listeners"] if ep["name"] == "INTERNAL")
    where = f"{internal['host']}:{internal['port']}"
    node = sec.node_files("node-2")
    tls_only = ClientSecurity(SecurityProtocol.SSL, str(sec.ca_path), str(node.cert),
                              str(node.key))
    with pytest.raises((OSError, RequestFailed)), \
            KafkaConnection(where, timeout_s=5, security=tls_only) as conn:
        _fetch(conn, replica_id=2)  # before any SASL login: the connection is closed
    password = sec.password_path(NODE_USER).read_text().strip()
    as_node = ClientSecurity(SecurityProtocol.SASL_SSL, str(sec.ca_path), str(node.cert),
                             str(node.key), sasl_mechanism="SCRAM-SHA-512",
                             sasl_username=NODE_USER, sasl_password=password)
    with KafkaConnection(where, timeout_s=5, security=as_node) as conn:
        assert _fetch(conn, replica_id=2) == 0  # a super user: ClusterAction
    # No broker was ever refused by another (their one line, ``peer_logins``).
    for log in (cluster.data_dir / "logs").glob("broker-*.log"):
        assert " refused: " not in log.read_text(errors="replace"), log


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
