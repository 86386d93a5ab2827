"""``cluster up --security ssl`` on real processes: clients over the SSL client listener, replicas
fetching over the mTLS inter-broker listener, brokers registering over the mTLS controller
channel; a peer without a valid client certificate (none, or another CA's) can neither register
a broker, heartbeat, vote, send an AlterPartition nor read the metadata log, nor fetch a replica:
each attempt is one log line and the cluster goes on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.cluster import LocalCluster
from floodmark.controller import rpc
from floodmark.security import certs
from floodmark.security.client_security import PLAINTEXT, ClientSecurity
from floodmark.security.listeners import SecurityProtocol
from tests.cluster.helpers import replicated_round_trip, wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("secured") / "cluster", brokers=2,
                     security="ssl").start()
    yield c
    c.stop()


def _stranger(directory: Path) -> ClientSecurity:
    """A client certificate of another CA: not one the cluster trusts."""
    other = certs.make_ca("not the cluster's CA")
    files = certs.issue_files(directory, "stranger", other, ("127.0.0.1",))
    return ClientSecurity(SecurityProtocol.SSL, None, str(files.cert), str(files.key),
                          check_hostname=False)


def test_clients_produce_and_consume_over_ssl_with_replication(cluster: LocalCluster) -> None:
    sec = cluster.security
    assert sec is not None
    props = dict(line.split("=", 1) for line in
                 (cluster.data_dir / "client.properties").read_text().splitlines())
    assert props == {"security.protocol": "SSL", "ssl.ca.location": str(sec.ca_path)}
    status = cluster.status()
    assert status["bootstrap"] == cluster.bootstrap and status["security"] == "ssl"
    conf = {"bootstrap.servers": status["bootstrap"], **props}
    topic = f"secure-{uuid.uuid4().hex[:6]}"
    # acks=all with min.insync.replicas=2: the follower fetched, mTLS
    replicated_round_trip(conf, topic, b"v" * 1024)
    # `cluster describe` reads every replica's own broker over the client listener (TLS).
    from floodmark.cluster.describe import describe_replicas

    (row,) = describe_replicas(cluster, topic)
    assert [r.get("error") for r in row["replicas"]] == [None, None]
    assert sorted(r["log_end_offset"] for r in row["replicas"]) == [20, 20]


CALLS = [
    ("register", {"broker_id": 9, "host": "127.0.0.1", "port": 1, "incarnation": "x"}),
    ("heartbeat", {"broker_id": 1, "broker_epoch": 1}),
    ("alter_partition", {"broker_id": 1, "broker_epoch": 1, "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "leader_epoch": 0,
                                            "partition_epoch": 0, "new_isr": [1],
                                            "new_isr_broker_epochs": [1]}]}]}),
    ("quorum", {"kind": "vote", "candidate_id": 9, "epoch": 99}),
    ("fetch_metadata", {"offset": 0, "max_wait_ms": 0}),
]


def test_a_peer_without_a_valid_certificate_is_refused(cluster: LocalCluster,
                                                       tmp_path: Path) -> None:
    sec = cluster.security
    assert sec is not None
    address = cluster.controller_address
    ca_only = ClientSecurity(SecurityProtocol.SSL, str(sec.ca_path))
    stranger = _stranger(tmp_path)
    log = cluster.log_path(0)
    before = log.read_text().count("TLS handshake failed")
    for method, args in CALLS:
        for who in (PLAINTEXT, ca_only, stranger):
            with pytest.raises(rpc.RpcError):
                rpc.blocking_call(address, method, args, 5.0, who)
    # The admin's certificate is welcome: the cluster is as it was (both brokers, unfenced).
    status = rpc.blocking_call(address, "status", {}, 5.0, cluster.channel_security)
    brokers = status["result"]["brokers"]
    assert [(b["id"], b["fenced"]) for b in brokers] == [(1, False), (2, False)]
    wait_until(lambda: log.read_text().count("TLS handshake failed") - before
               == 3 * len(CALLS), 10, "one log line per refused peer")
    assert "Traceback" not in log.read_text()

    # Replica fetching: the INTERNAL listener wants a node certificate too.
    internal = next(ep for ep in brokers[0]["listeners"] if ep["name"] == "INTERNAL")
    where = f"{internal['host']}:{internal['port']}"
    api_versions = (18, 3, {"client_software_name": "t", "client_software_version": "1"})
    for who in (ca_only, stranger):
        with pytest.raises((OSError, RequestFailed)), \
                KafkaConnection(where, timeout_s=5, security=who) as conn:
            conn.request(*api_versions)
    node = sec.node_files("node-2")
    peer = ClientSecurity(SecurityProtocol.SSL, str(sec.ca_path), str(node.cert), str(node.key))
    with KafkaConnection(where, timeout_s=5, security=peer) as conn:
        assert conn.request(*api_versions).error_code == 0

