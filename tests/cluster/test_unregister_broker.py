"""UnregisterBroker on a real cluster (one controller process, two brokers): a broker that
was shut down is fenced, then unregistered through the other broker (forwarded to the
controller); DescribeCluster no longer lists it, the controller still knows it gone after a
SIGKILL and restart (the ``unregister_broker`` record in its metadata log), an id with no
registration is BROKER_ID_NOT_REGISTERED, and the broker started again registers anew. Kafka's
own ``kafka-cluster unregister`` does the same (slow: a JVM per command)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection, RequestFailed
from floodmark.cluster.local import CONTROLLER_ID, LocalCluster
from floodmark.errors import ErrorCode
from tests.cluster.helpers import start_cluster, wait_until

UNREGISTER_BROKER, DESCRIBE_CLUSTER = 64, 60


def _listed(address: str) -> dict[int, bool] | None:
    """broker id -> fenced, as DescribeCluster v2 (fenced brokers included) answers."""
    try:
        with KafkaConnection(address, timeout_s=5) as c:
            r = c.request(DESCRIBE_CLUSTER, 2, {"include_cluster_authorized_operations": False,
                                                "endpoint_type": 1,
                                                "include_fenced_brokers": True})
    except (OSError, RequestFailed):
        return None
    return {int(b.broker_id): bool(b.is_fenced) for b in r.brokers}


def _unregister(address: str, broker_id: int) -> Any:
    with KafkaConnection(address, timeout_s=30) as c:
        return c.request(UNREGISTER_BROKER, 0, {"broker_id": broker_id})


def _shut_down_and_fenced(cluster: LocalCluster) -> str:
    survivor = cluster.address(1)
    cluster.kill(2)
    wait_until(lambda: _listed(survivor) == {1: False, 2: True}, 60, "broker 2 fenced")
    return survivor


def test_a_shut_down_broker_is_unregistered_for_good(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", brokers=2)
    try:
        survivor = _shut_down_and_fenced(cluster)
        r = _unregister(survivor, 2)
        assert (int(r.error_code), r.error_message) == (0, None)
        assert _listed(survivor) == {1: False}
        r = _unregister(survivor, 2)
        assert (int(r.error_code), r.error_message) == (
            ErrorCode.BROKER_ID_NOT_REGISTERED, "Broker ID 2 is not currently registered")
        # The controller replays its metadata log after a SIGKILL: still gone.
        cluster.kill(CONTROLLER_ID)
        cluster.start_node(CONTROLLER_ID)

        def refused_again() -> bool:
            try:
                return int(_unregister(survivor, 2).error_code) == \
                    ErrorCode.BROKER_ID_NOT_REGISTERED
            except (OSError, RequestFailed):
                return False
        wait_until(refused_again, 60, "the restarted controller's answer")
        assert _listed(survivor) == {1: False}
        # Started again, the broker registers anew.
        cluster.start_node(2)
        wait_until(lambda: _listed(survivor) == {1: False, 2: False}, 60,
                   "broker 2 registered again")
    finally:
        cluster.stop()


@pytest.mark.slow
def test_kafka_cluster_unregister(tmp_path: Path) -> None:
    from tests.reference.kafka_node import missing_reason, run_tool

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster(tmp_path / "c", brokers=2)
    try:
        survivor = _shut_down_and_fenced(cluster)
        r = run_tool("kafka-cluster", ["unregister", "--bootstrap-server", survivor,
                                       "--id", "2"], timeout_s=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Broker 2 is no longer registered." in r.stdout
        assert _listed(survivor) == {1: False}
        r = run_tool("kafka-cluster", ["unregister", "--bootstrap-server", survivor,
                                       "--id", "2"], timeout_s=300)
        assert r.returncode != 0
        assert "BrokerIdNotRegisteredException" in r.stdout + r.stderr
    finally:
        cluster.stop()
