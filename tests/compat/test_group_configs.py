"""Group configs (ConfigResource GROUP, KIP-848 / KIP-932) with a real client: confluent-kafka's
AdminClient sets ``share.auto.offset.reset=earliest`` for one share group
(incremental_alter_configs), describe_configs answers it as DYNAMIC_GROUP_CONFIG and the
others as defaults, Kafka's refusals come back as INVALID_CONFIG, a share consumer of that group
starts at the log start while a group without the config starts at the end (the broker's
default, latest), one with ``by_duration:PT1H`` at its first record of the last hour, and the
config survives a broker restart."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

pytestmark = pytest.mark.compat

STALL_S = 30.0


def alter(admin: AdminClient, group: str, *ops: tuple[str, str | None, AlterConfigOpType],
          validate_only: bool = False) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops])
    for f in admin.incremental_alter_configs([res], validate_only=validate_only).values():
        f.result(30)


def describe(admin: AdminClient, group: str) -> dict[str, Any]:
    (f,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return dict(f.result(30))


def refusal(admin: AdminClient, group: str, name: str, value: str) -> str:
    with pytest.raises(KafkaException) as err:
        alter(admin, group, (name, value, AlterConfigOpType.SET))
    e = err.value.args[0]
    assert e.name() == "INVALID_CONFIG", e
    return str(e.str())


def offsets_polled(bootstrap: str, group: str, topic: str, until: int,
                   produce_more: Producer | None = None) -> list[int]:
    """Offsets a new share consumer of ``group`` gets until it has ``until`` of them (each
    poll without records produces one more when ``produce_more`` is given)."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([topic])
    got: list[int] = []
    deadline = time.monotonic() + STALL_S
    try:
        for _ in range(10_000):
            batch = [m for m in c.poll(0.3) if m.error() is None]
            got += [m.offset() for m in batch]
            if len(got) >= until:
                return got
            if not batch and produce_more is not None:
                produce_more.produce(topic, value=b"later", partition=0)
                produce_more.flush(10)
            assert time.monotonic() < deadline, f"only {got} from group {group}"
    finally:
        c.close()
    raise AssertionError("poll budget spent")


@pytest.mark.timeout(180)
def test_group_configs_set_described_used_and_kept(broker_factory: Any) -> None:
    b = broker_factory("--set", "group.share.enable=true")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    topic = "gc-t"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(5):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0

    # Kafka's refusals, each as INVALID_CONFIG with Kafka's message
    assert refusal(admin, "g", "nope", "1") == "Unknown group config name: nope"
    assert refusal(admin, "g", "share.auto.offset.reset", "sometimes").startswith(
        "Invalid value sometimes for configuration share.auto.offset.reset: ")
    assert refusal(admin, "g", "share.record.lock.duration.ms", "5000") == (
        "share.record.lock.duration.ms must be greater than or equal to "
        "group.share.min.record.lock.duration.ms")
    alter(admin, "g", ("share.delivery.count.limit", "3", AlterConfigOpType.SET),
          validate_only=True)
    assert describe(admin, "g")["share.delivery.count.limit"].source == \
        ConfigSource.DEFAULT_CONFIG.value  # validate_only stored nothing

    alter(admin, "g", ("share.auto.offset.reset", "earliest", AlterConfigOpType.SET),
          ("share.delivery.count.limit", "3", AlterConfigOpType.SET))
    configs = describe(admin, "g")
    reset = configs["share.auto.offset.reset"]
    assert (reset.value, reset.source, reset.is_read_only) == (
        "earliest", ConfigSource.GROUP_CONFIG.value, False)
    lock = configs["share.record.lock.duration.ms"]
    assert (lock.value, lock.source) == ("30000", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["share.delivery.count.limit"].value == "3"
    assert "consumer.session.timeout.ms" in configs and "streams.num.standby.replicas" in configs

    # the group's own value: its share partition starts at the log start
    assert offsets_polled(b.bootstrap, "g", topic, 5)[:5] == [0, 1, 2, 3, 4]
    # a group without it runs with the broker's latest: it never sees offsets 0..4
    other = offsets_polled(b.bootstrap, "other", topic, 1, produce_more=p)
    assert min(other) >= 5, other

    # by_duration: the first record no older than the duration (ListOffsets by time)
    old_ms = int(time.time() * 1000) - 2 * 3_600_000
    admin.create_topics([NewTopic("gc-d", 1, 1)])["gc-d"].result(30)
    for i in range(5):
        p.produce("gc-d", value=b"%d" % i, partition=0,
                  timestamp=old_ms if i < 3 else int(time.time() * 1000))
    assert p.flush(30) == 0
    alter(admin, "d", ("share.auto.offset.reset", "by_duration:PT1H", AlterConfigOpType.SET))
    assert offsets_polled(b.bootstrap, "d", "gc-d", 2)[:2] == [3, 4]

    b.restart()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    configs = describe(admin, "g")
    assert configs["share.auto.offset.reset"].value == "earliest"
    assert configs["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
    alter(admin, "g", ("share.auto.offset.reset", None, AlterConfigOpType.DELETE))
    reset = describe(admin, "g")["share.auto.offset.reset"]
    assert (reset.value, reset.source) == ("latest", ConfigSource.DEFAULT_CONFIG.value)
    assert describe(admin, "g")["share.delivery.count.limit"].value == "3"
