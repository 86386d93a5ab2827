"""One broker (issue 10): a cluster member is the same ``Broker`` as a lone node, given another
membership and a replica manager. The APIs only the cluster broker used to answer (its own
dispatch before the handler table) are ordinary handlers of the one table: a lone broker serves
DescribeQuorum, replica id -2 reads and FindCoordinator through the same code."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.broker.handlers import HANDLERS, RAW_HANDLERS
from floodmark.client.connection import decode_response, encode_request
from floodmark.wire.api_table import SERVED, ApiKey


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:9999",
                               overrides=["offsets.topic.num.partitions=1"])
    b = Broker(config)
    b.open()
    asyncio.run(b.create_topic("t", 1, 1, {}))
    yield b
    b.close()


def _call(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    frame = encode_request(api_key, version, 7, body)[4:]
    out = broker.dispatch(memoryview(frame), None)  # type: ignore[arg-type]
    assert isinstance(out, list), "answered at once"
    return decode_response(b"".join(bytes(p) for p in out)[4:], api_key, version, 7)


def test_a_cluster_member_is_the_broker_itself() -> None:
    import floodmark.broker.cluster_member as cluster_member

    assert Broker.__subclasses__() == []
    assert not hasattr(cluster_member, "ClusterBroker")
    served = set(HANDLERS) | set(RAW_HANDLERS)
    assert served == SERVED


def test_a_lone_broker_answers_describe_quorum_for_what_it_leads(broker: Broker) -> None:
    ps = broker.partitions[("t", 0)]
    answer = _call(broker, ApiKey.DESCRIBE_QUORUM, 1, {"topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0}]},
        {"topic_name": "nope", "partitions": [{"partition_index": 0}]}]})
    known, unknown = answer.topics
    p = known.partitions[0]
    assert (p.error_code, p.leader_id, p.leader_epoch) == (0, broker.node_id, ps.leader_epoch)
    assert [v.replica_id for v in p.current_voters] == [broker.node_id]
    assert unknown.partitions[0].error_code != 0


def _call_async(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """A request answered later (a coroutine out of dispatch), awaited here."""
    frame = encode_request(api_key, version, 7, body)[4:]

    async def answer() -> Any:
        out = broker.dispatch(memoryview(frame), None)  # type: ignore[arg-type]
        return out if isinstance(out, list) else await out

    out = asyncio.run(answer())
    return decode_response(b"".join(bytes(p) for p in out)[4:], api_key, version, 7)


def test_a_lone_broker_answers_describe_quorum_for_the_metadata_log(broker: Broker) -> None:
    """``__cluster_metadata``: the lone node is the only voter and the leader (epoch 0: no
    election), its metadata log's end committed, no observer, no controller endpoint."""
    answer = _call_async(broker, ApiKey.DESCRIBE_QUORUM, 2, {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
    assert answer.error_code == 0 and answer.nodes == ()
    (topic,) = answer.topics
    (p,) = topic.partitions
    (voter,) = p.current_voters
    assert (p.error_code, p.leader_id, p.leader_epoch) == (0, broker.node_id, 0)
    assert voter.replica_id == broker.node_id and p.high_watermark == voter.log_end_offset > 0
    assert voter.last_fetch_timestamp > 0 and p.observers == ()


def test_describe_quorum_refuses_any_other_metadata_partition(broker: Broker) -> None:
    """As Kafka's ``KafkaRaftClient``: exactly ``__cluster_metadata``-0 or every partition
    named answers UNKNOWN_TOPIC_OR_PARTITION with Kafka's unset values."""
    answer = _call(broker, ApiKey.DESCRIBE_QUORUM, 2, {"topics": [
        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]},
        {"topic_name": "t", "partitions": [{"partition_index": 0}]}]})
    parts = [p for t in answer.topics for p in t.partitions]
    assert [(p.error_code, p.leader_id, p.high_watermark) for p in parts] == [(3, 0, 0)] * 2


def test_a_lone_broker_answers_debug_reads_from_its_own_log(broker: Broker) -> None:
    ps = broker.partitions[("t", 0)]
    answer = _call(broker, ApiKey.LIST_OFFSETS, 4, {
        "replica_id": -2, "isolation_level": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                "current_leader_epoch": -1,
                                                "timestamp": -1}]}]})
    p = answer.topics[0].partitions[0]
    assert (p.error_code, p.offset) == (0, ps.log_end_offset)
    assert p.leader_epoch == ps.log.epoch_cache.latest_epoch


def test_find_coordinator_asks_the_membership(broker: Broker) -> None:
    answer = _call(broker, ApiKey.FIND_COORDINATOR, 4,
                   {"key_type": 0, "coordinator_keys": ["g1", "g2"]})
    host, port = broker.advertised
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in answer.coordinators] == [
        ("g1", broker.node_id, host, port, 0), ("g2", broker.node_id, host, port, 0)]
