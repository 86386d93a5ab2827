"""The controller never writes a record a broker cannot apply (issue 11, Build 3).

Hypothesis drives ``ControllerLogic`` with random admin requests, valid and invalid (topic
names, partition counts, replication factors, manual assignments, topic and broker configs of
the right and the wrong type, unknown and read-only names, reassignments, elections, ISR
changes, registrations, heartbeats, session expiry). Every record it emits is then applied the
way a broker applies it: the broker's image (``MetadataImage.apply_all`` with the same check
brokers run, reporting anything it would skip) and the broker's use of configs (a topic's
LogConfig and min.insync.replicas, the dynamic layer on top of the static settings). A refused
request emits nothing, and the broker's image ends equal to the controller's.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.controller.image import MetadataImage, UnappliedRecord
from floodmark.controller.logic import ControllerConfig, ControllerLogic, elr_config
from floodmark.controller.snapshot import image_records
from floodmark.errors import KafkaError
from floodmark.replication.election import AlterPartitionRequest
from floodmark.settings import DEFAULTS, dynamic_layer, topic_log_config
from floodmark.storage.config import LogConfig

EXAMPLES = int(os.environ.get("FLOODMARK_PROPERTY_EXAMPLES", "150"))

GOOD_TOPICS = ["a", "b", "c.d"]
BAD_TOPICS = ["", "bad name", "x" * 250, "..", "__consumer_offsets"]
TOPIC_VALUES: dict[str, list[Any]] = {
    "min.insync.replicas": ["1", "2", 2, "abc", "0", "-1", "1.5", None],
    "retention.ms": ["1000", "-1", "x", "", 12],
    "retention.bytes": ["1048576", "lots"],
    "segment.bytes": ["1048576", "12.5"],
    "cleanup.policy": ["compact", "delete", "compact,delete", "bogus"],
    "unclean.leader.election.enable": ["true", "false", "maybe", True],
    "message.timestamp.type": ["CreateTime", "LogAppendTime", "Bogus"],
    "max.message.bytes": ["1000", "big"],
    "min.cleanable.dirty.ratio": ["0.5", "half"],
    "flush.messages": ["1", "often"],
    "retention.hours": ["1", "an hour"],
    "no.such.setting": ["1"],
}
BROKER_VALUES: dict[str, list[Any]] = {
    "min.insync.replicas": [1, 2, "2", 0, "abc"],
    "log.retention.ms": [1000, "1000", "x"],
    "log.segment.bytes": [1 << 20, "huge"],
    "log.cleanup.policy": ["compact", "delete", "zzz"],
    "unclean.leader.election.enable": [True, "true", "nope"],
    "log.cleaner.backoff.ms": [10, -5],
    "log.message.timestamp.type": ["CreateTime", "Bogus"],
    "num.partitions": [3],  # read-only
    "no.such.setting": [1],
}


def _configs(values: dict[str, list[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    pairs = [(name, value) for name, choices in sorted(values.items()) for value in choices]
    return st.lists(st.sampled_from(pairs), max_size=3).map(dict)


brokers = st.integers(1, 5)
topics = st.sampled_from(GOOD_TOPICS) | st.sampled_from(GOOD_TOPICS) | st.sampled_from(BAD_TOPICS)
replica_lists = (st.lists(st.integers(1, 4), min_size=1, max_size=3)
                 | st.lists(st.integers(0, 6), min_size=0, max_size=4))

ops = st.one_of(
    st.tuples(st.just("register"), brokers, st.sampled_from(["a", "b"]), st.booleans()),
    st.tuples(st.just("heartbeat"), brokers, st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 3000), st.integers(0, 5)),
    st.tuples(st.just("create_topic"), topics, st.integers(1, 4) | st.integers(-1, 5),
              st.integers(1, 3) | st.integers(-1, 5),
              st.just({}) | _configs(TOPIC_VALUES), st.booleans(),
              st.none() | st.none() | st.lists(replica_lists, min_size=0, max_size=3)),
    st.tuples(st.just("delete_topic"), topics),
    st.tuples(st.just("create_partitions"), topics, st.integers(-1, 6), st.booleans(),
              st.none() | st.lists(replica_lists, min_size=0, max_size=3)),
    st.tuples(st.just("alter_topic_configs"), topics, _configs(TOPIC_VALUES)),
    st.tuples(st.just("alter_broker_configs"), st.sampled_from(["", "1", "2", "x", "-1"]),
              _configs(BROKER_VALUES)),
    st.tuples(st.just("elect_leader"), topics, st.integers(-1, 3), st.booleans()),
    st.tuples(st.just("reassign"), topics, st.integers(0, 3), st.none() | replica_lists),
    st.tuples(st.just("alter_partition"), topics, st.integers(0, 3), st.integers(0, 15),
              st.booleans()),
    st.tuples(st.just("fence"), brokers),
    st.tuples(st.just("move_leadership"), topics, st.integers(0, 3)),
    st.tuples(st.just("allocate_producer_ids")),
    st.tuples(st.just("rebalance")),
)


def _alter_partition(logic: ControllerLogic, topic: str, partition: int, pick: int,
                     stale: bool) -> None:
    reg = logic.image.partition(topic, partition)
    if reg is None:
        logic.alter_partition(topic, partition, AlterPartitionRequest(1, 0, 0, 0, (1,), (0,)))
        return
    isr = tuple(r for i, r in enumerate(reg.replicas) if pick >> i & 1) or reg.replicas[:1]
    epochs = logic.image.broker_epochs()
    logic.alter_partition(topic, partition, AlterPartitionRequest(
        broker_id=reg.leader, broker_epoch=epochs.get(reg.leader, -1),
        leader_epoch=reg.leader_epoch, partition_epoch=reg.partition_epoch - int(stale),
        new_isr=isr, new_isr_broker_epochs=tuple(epochs.get(r, -1) for r in isr)))


def _run(logic: ControllerLogic, op: tuple[Any, ...], now: int) -> None:
    kind, *a = op
    if kind == "register":
        logic.register_broker(a[0], "127.0.0.1", 9000 + a[0], f"{a[0]}-{a[1]}", now,
                              clean_shutdown=a[2], rack=f"rack-{a[0] % 2}" if a[1] == "b" else None)
    elif kind == "heartbeat":
        reg = logic.image.brokers.get(a[0])
        logic.heartbeat(a[0], reg.broker_epoch if reg else 0, now, want_shutdown=a[1])
    elif kind == "tick":  # every broker but one heartbeats, then the controller ticks
        for b, reg in sorted(logic.image.brokers.items()):
            if b != a[1]:
                logic.heartbeat(b, reg.broker_epoch, now)
        logic.tick(now)
    elif kind == "create_topic":
        name, partitions, rf, configs, validate_only, assignments = a
        logic.create_topic(name, partitions, rf, configs, validate_only=validate_only,
                           assignments=None if assignments is None
                           else [tuple(r) for r in assignments])
    elif kind == "delete_topic":
        logic.delete_topic(a[0])
    elif kind == "create_partitions":
        logic.create_partitions(a[0], a[1], validate_only=a[2],
                                assignments=None if a[3] is None else [tuple(r) for r in a[3]])
    elif kind == "alter_topic_configs":
        logic.alter_topic_configs(a[0], a[1])
    elif kind == "alter_broker_configs":
        logic.alter_broker_configs(a[0], a[1])
    elif kind == "elect_leader":
        logic.elect_leader(a[0], a[1], a[2])
    elif kind == "reassign":
        logic.alter_partition_reassignment(a[0], a[1], None if a[2] is None else tuple(a[2]))
    elif kind == "alter_partition":
        _alter_partition(logic, *a)
    elif kind == "fence":
        logic.fence_broker(a[0], "test")
    elif kind == "move_leadership":
        logic.move_leadership(a[0], a[1], "test")
    elif kind == "allocate_producer_ids":
        logic.allocate_producer_ids()
    else:
        logic.rebalance_preferred_leaders()


def _broker_takes_into_use(rec: dict[str, Any]) -> None:
    """What a broker does with a record's configs (topic configs on its partitions, dynamic
    broker configs on top of its static settings)."""
    if rec["type"] in ("topic", "topic_configs"):
        topic_log_config(rec["configs"])
    elif rec["type"] == "broker_configs":
        static = {k: v for k, v in DEFAULTS.items() if v is not None}
        LogConfig.from_kafka({**static, **{k: v for k, v in dynamic_layer(rec["configs"]).items()
                                           if v is not None}})


@pytest.mark.parametrize("elr", [False, True], ids=["no-elr", "elr"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=40))
def test_every_record_the_controller_emits_is_applied_by_a_broker(
        elr: bool, schedule: list[tuple[Any, ...]]) -> None:
    """With and without KIP-966 (``eligible.leader.replicas.version``), as real controllers run."""
    logic = ControllerLogic(MetadataImage(), ControllerConfig(broker_session_timeout_ms=1000,
                                                              **elr_config(elr, 2)))
    logic.bootstrap()
    broker_image = MetadataImage()
    skipped: list[UnappliedRecord] = []
    for b in (1, 2, 3):
        logic.register_broker(b, "127.0.0.1", 9000 + b, f"{b}-a", 0)
    logic.create_topic("a", 3, 3, {"min.insync.replicas": "2"})
    logic.create_topic("b", 2, 2, {"cleanup.policy": "compact"})
    broker_image.apply_all(logic.take_pending(), skipped.append)
    now = 0
    for op in schedule:
        now += 10 + (op[1] if op[0] == "tick" else 0)
        try:
            _run(logic, op, now)
        except KafkaError:
            assert logic.pending == [], f"{op} was refused but emitted {logic.pending}"
            continue
        records = logic.take_pending()
        broker_image.apply_all(records, skipped.append)
        assert skipped == [], f"{op}: a broker skipped {skipped}"
        for _, rec in records:
            _broker_takes_into_use(rec)
    assert broker_image.next_offset == logic.image.next_offset
    assert image_records(broker_image) == image_records(logic.image)
