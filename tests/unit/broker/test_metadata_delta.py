"""Which hosted partitions a batch of metadata records can change (broker.metadata_delta)."""

from __future__ import annotations

from floodmark.broker.metadata_delta import EVERYTHING, Touched, touched
from floodmark.controller import scram


def test_partition_and_reassignment_records_name_their_partition() -> None:
    got = touched([{"type": "partition", "topic": "a", "partition": 3},
                   {"type": "reassignment", "topic": "b", "partition": 0, "target": None}])
    assert got == Touched(partitions=frozenset({("a", 3), ("b", 0)}))
    assert not got.everything


def test_topic_records_name_every_partition_of_their_topic() -> None:
    got = touched([{"type": "topic", "name": "a"}, {"type": "topic_configs", "name": "b"},
                   {"type": "remove_topic", "name": "c"}])
    assert got.topics == frozenset({"a", "b", "c"})
    assert not got.partitions and not got.everything


def test_broker_records_touch_everything() -> None:
    for kind in ("register_broker", "fence_broker", "unfence_broker", "broker_shutdown",
                 "broker_configs", "cluster_id"):
        assert touched([{"type": "partition", "topic": "a", "partition": 0},
                        {"type": kind}]) is EVERYTHING


def test_an_unknown_kind_and_an_empty_batch_touch_everything() -> None:
    assert touched([{"type": "something_new"}]) is EVERYTHING
    assert touched([]) is EVERYTHING


def test_records_about_no_partition_touch_nothing() -> None:
    got = touched([{"type": kind} for kind in (
        "producer_ids", "acl", "remove_acl", "client_quota", "leader_change", "voters",
        scram.CREDENTIAL, scram.REMOVE)])
    assert not got
