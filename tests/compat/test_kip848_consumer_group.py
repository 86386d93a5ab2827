"""KIP-848 consumer groups with a real client: librdkafka's ``group.protocol=consumer``
(confluent-kafka). Three members share a topic's partitions, one leaves and the others take its
partitions; every record is delivered once (each is committed before the next poll, so a
partition's next owner starts where the last one stopped); the commits are there afterwards;
the AdminClient describes the group (ConsumerGroupDescribe). Classic members beside consumer
members, and the migration between the two kinds: ``test_kip848_migration``.
A regular-expression subscription follows new topics, and a static member keeps its place."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.compat

TOPIC, GROUP, PARTITIONS = "kip848", "kip848-g", 6


def consumer(bootstrap: str, name: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                  "group.protocol": "consumer", "client.id": name,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    return c


def produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        p.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0


def commit(c: Consumer, m: Message) -> None:
    """Commit the record before polling again. A commit that races a heartbeat answer which
    bumped the member epoch is STALE_MEMBER_EPOCH (Kafka answers the same); librdkafka has the
    new epoch a moment later, and the commit is retried then (bounded)."""
    for attempt in range(50):
        try:
            c.commit(message=m, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or attempt == 49:
                raise
            time.sleep(0.1)


def poll_until(members: dict[str, Consumer], done: Callable[[], bool],
               got: dict[int, str], timeout_s: float = 45.0) -> None:
    """Poll every member in turn until ``done()``; each record is committed before the next
    poll. Fails when no progress (records or assignment change) is made for ``timeout_s``."""
    last_progress = time.monotonic()
    seen_state: object = None
    for _ in range(100_000):
        if done():
            return
        for name, c in members.items():
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            value = int(m.value())
            assert value not in got, f"record {value} delivered to {got[value]} and {name}"
            got[value] = name
            commit(c, m)
            last_progress = time.monotonic()
        state = tuple(sorted((n, tuple(sorted(tp.partition for tp in c.assignment())))
                             for n, c in members.items()))
        if state != seen_state:
            seen_state, last_progress = state, time.monotonic()
        assert time.monotonic() - last_progress < timeout_s, f"no progress; {seen_state}"
    raise AssertionError("poll loop bound reached")


def assigned(members: dict[str, Consumer]) -> dict[str, set[int]]:
    return {n: {tp.partition for tp in c.assignment()} for n, c in members.items()}


def test_members_share_partitions_one_leaves_nothing_lost_or_doubled(broker_factory) -> None:  # type: ignore[no-untyped-def]
    bootstrap = broker_factory("--set", "group.consumer.heartbeat.interval.ms=300").bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    members = {n: consumer(bootstrap, n) for n in ("c1", "c2", "c3")}
    got: dict[int, str] = {}
    try:
        def shared() -> bool:
            a = assigned(members)
            return all(len(ps) == 2 for ps in a.values()) and \
                set().union(*a.values()) == set(range(PARTITIONS))

        poll_until(members, shared, got)
        produce(bootstrap, 0, 120)
        poll_until(members, lambda: len(got) == 120, got)
        assert set(got.values()) == {"c1", "c2", "c3"}  # each consumed its share

        members.pop("c3").close()  # leaves the group (member epoch -1)
        produce(bootstrap, 120, 120)

        def taken_over() -> bool:
            a = assigned(members)
            return len(got) == 240 and set().union(*a.values()) == set(range(PARTITIONS)) \
                and not a["c1"] & a["c2"]

        poll_until(members, taken_over, got)
        assert sorted(got) == list(range(240))
        assert {got[i] for i in range(120, 240)} <= {"c1", "c2"}

        desc = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
        assert str(desc.type).endswith("CONSUMER"), desc.type
        assert str(desc.state).endswith("STABLE"), desc.state
        assert desc.partition_assignor == "uniform"
        by_client = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
                     for m in desc.members}
        assert by_client == assigned(members)

        # the commits: every partition at its end (40 records each)
        c1 = members["c1"]
        committed = c1.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                 timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == {
            p: 240 // PARTITIONS for p in range(PARTITIONS)}

        # floodmark's own CLI describes it through ConsumerGroupDescribe
        out = subprocess.run([sys.executable, "-m", "floodmark.cli", "group", "describe", GROUP,
                              "--json", "--bootstrap-server", bootstrap], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        cli = json.loads(out)
        assert cli["state"] == "Stable"
        assert {r["partition"]: r["current_offset"] for r in cli["partitions"]} == {
            p: 240 // PARTITIONS for p in range(PARTITIONS)}
        assert {r["client_id"] for r in cli["partitions"]} == {"c1", "c2"}
    finally:
        for c in members.values():
            c.close()


def test_regex_subscription_and_a_static_member_coming_back(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """librdkafka sends a ``^``-pattern subscription as the regular expression, the
    coordinator matches it against the topics (a new topic joins the assignment); a static
    member (``group.instance.id``) that closes keeps its place (-2) and its next instance gets
    the same partitions."""
    bootstrap = broker_factory("--set", "group.consumer.heartbeat.interval.ms=300").bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("re-a", 2, 1), NewTopic("re-b", 1, 1)]).values():
        f.result(30)

    def static_member() -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-re",
                      "group.protocol": "consumer", "group.instance.id": "static-1",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["^re-.*"])
        return c

    def owned(c: Consumer) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in c.assignment()}

    def poll_for(c: Consumer, want: set[tuple[str, int]]) -> None:
        last, since = owned(c), time.monotonic()
        for _ in range(10_000):
            if owned(c) == want:
                return
            c.poll(0.1)
            if owned(c) != last:
                last, since = owned(c), time.monotonic()
            assert time.monotonic() - since < 30, f"stuck at {last}, want {want}"

    c = static_member()
    try:
        poll_for(c, {("re-a", 0), ("re-a", 1), ("re-b", 0)})
        admin.create_topics([NewTopic("re-c", 1, 1)])["re-c"].result(30)
        poll_for(c, {("re-a", 0), ("re-a", 1), ("re-b", 0), ("re-c", 0)})
    finally:
        c.close()  # a static member leaves with member epoch -2
    desc = admin.describe_consumer_groups(["kip848-re"])["kip848-re"].result(30)
    assert [m.group_instance_id for m in desc.members] == ["static-1"]
    kept = {(tp.topic, tp.partition) for tp in desc.members[0].assignment.topic_partitions}
    assert kept == {("re-a", 0), ("re-a", 1), ("re-b", 0), ("re-c", 0)}
    c = static_member()
    try:
        poll_for(c, kept)
        desc = admin.describe_consumer_groups(["kip848-re"])["kip848-re"].result(30)
        assert [m.member_id for m in desc.members] == [c.memberid()]
    finally:
        c.close()
