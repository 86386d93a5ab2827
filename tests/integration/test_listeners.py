"""Several listeners on one real broker: each answers Metadata, DescribeCluster and
FindCoordinator with the endpoints of the listener the request came in on (as Kafka does)."""

from __future__ import annotations

import re
from collections.abc import Callable

from floodmark.client.connection import KafkaConnection
from tests.conftest import BrokerProcess

LISTENERS = [
    "--set", "listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
    "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
    "--set", "advertised.listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://ext.example:19092",
]


def listener_ports(b: BrokerProcess) -> dict[str, int]:
    """The broker prints one ``listener NAME (PROTOCOL) at HOST:PORT`` line per listener."""
    assert b.proc is not None and b.proc.stdout is not None
    out: dict[str, int] = {}
    while len(out) < 2:
        line = b.proc.stdout.readline().decode()
        m = re.search(r"listener (\S+) \(\S+\) at \S+:(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def test_each_listener_advertises_its_own_endpoints(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(*LISTENERS)
    ports = listener_ports(b)
    assert ports["PLAINTEXT"] == b.port
    with KafkaConnection(f"127.0.0.1:{ports['PLAINTEXT']}") as conn:
        meta = conn.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        assert [(x.host, x.port) for x in meta.brokers] == [("127.0.0.1", ports["PLAINTEXT"])]
    with KafkaConnection(f"127.0.0.1:{ports['EXTERNAL']}") as conn:
        meta = conn.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        assert [(x.host, x.port) for x in meta.brokers] == [("ext.example", 19092)]
        cluster = conn.request(60, 0, {"include_cluster_authorized_operations": False})
        assert [(x.host, x.port) for x in cluster.brokers] == [("ext.example", 19092)]
        coord = conn.request(10, 4, {"key_type": 0, "coordinator_keys": ["g"]})
        assert [(c.host, c.port) for c in coord.coordinators] == [("ext.example", 19092)]
    assert "listening on 127.0.0.1:" in b.log_text() and "(EXTERNAL, PLAINTEXT) advertised " \
        "ext.example:19092" in b.log_text()
