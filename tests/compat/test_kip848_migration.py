"""KIP-848's online migration with real clients (confluent-kafka / librdkafka): a classic
group with members is upgraded when a ``group.protocol=consumer`` member joins it, the classic
member stays in the consumer group (JoinGroup/SyncGroup/Heartbeat against the consumer group's
reconciliation; a classic member may also join a consumer group), both consume one topic with every record delivered once and no partition
owned twice, the offsets one committed are where the other starts; when the consumer-protocol
member leaves, the group is a classic group again (ListGroups says so) and the classic member
takes every partition. With ``group.consumer.migration.policy=disabled`` the heartbeat is
GROUP_ID_NOT_FOUND, as Kafka answers."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.compat

TOPIC, PARTITIONS = "migrate", 4


def member(bootstrap: str, group: str, protocol: str, name: str,
           strategy: str = "range") -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "group.protocol": protocol, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                     "partition.assignment.strategy": strategy})
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


def produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        p.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0


_RETRIED = {KafkaError.STALE_MEMBER_EPOCH, KafkaError.ILLEGAL_GENERATION,
            KafkaError.REBALANCE_IN_PROGRESS, KafkaError.UNKNOWN_MEMBER_ID}


def commit(c: Consumer, m: Message) -> bool:
    """Commit the record before polling again; False when the member's generation moved on
    (a rebalance: the record's partition may have gone, and its next owner re-reads it)."""
    try:
        c.commit(message=m, asynchronous=False)
        return True
    except KafkaException as exc:
        if exc.args[0].code() not in _RETRIED:
            raise
        return False


def assigned(members: dict[str, Consumer]) -> dict[str, set[int]]:
    return {n: {tp.partition for tp in c.assignment()} for n, c in members.items()}


def poll_until(members: dict[str, Consumer], done: Callable[[], bool],
               got: dict[int, str], timeout_s: float = 45.0) -> None:
    """Poll every member in turn until ``done()``; a record is committed before the next
    poll. A record is delivered twice only when its first commit was refused by a rebalance
    (at-least-once); every delivery is checked against the partitions its member owns, and
    no partition is owned by two members at once. Fails on no progress for ``timeout_s``."""
    last_progress = time.monotonic()
    seen_state: object = None
    uncommitted: set[int] = set()
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
            assert value not in got or value in uncommitted, \
                f"record {value} delivered to {got.get(value)} and {name}"
            got[value] = name
            if commit(c, m):
                uncommitted.discard(value)
            else:
                uncommitted.add(value)
            last_progress = time.monotonic()
        a = assigned(members)
        owners = [p for ps in a.values() for p in ps]
        assert len(owners) == len(set(owners)), f"a partition owned twice: {a}"
        state = tuple(sorted((n, tuple(sorted(ps))) for n, ps in a.items()))
        if state != seen_state:
            seen_state, last_progress = state, time.monotonic()
        assert time.monotonic() - last_progress < timeout_s, f"no progress; {seen_state}"
    raise AssertionError("poll loop bound reached")


def group_type(admin: AdminClient, group: str) -> str:
    for g in admin.list_consumer_groups().result(30).valid:
        if g.group_id == group:
            return str(g.type.name).lower()
    return "absent"


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_upgrade_mixed_consumption_then_downgrade(broker_factory, strategy: str) -> None:  # type: ignore[no-untyped-def]
    group = f"mig-{strategy}"
    bootstrap = broker_factory("--set", "group.consumer.heartbeat.interval.ms=300").bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    members = {"classic": member(bootstrap, group, "classic", "classic", strategy)}
    got: dict[int, str] = {}
    try:
        poll_until(members, lambda: assigned(members)["classic"] == set(range(PARTITIONS)),
                   got)
        assert group_type(admin, group) == "classic"
        produce(bootstrap, 0, 100)
        poll_until(members, lambda: len(got) == 100, got)

        # a consumer-protocol member joins: the group is upgraded, the classic member stays
        members["consumer"] = member(bootstrap, group, "consumer", "consumer")

        def shared() -> bool:
            a = assigned(members)
            return all(len(ps) == PARTITIONS // 2 for ps in a.values()) and \
                set().union(*a.values()) == set(range(PARTITIONS))

        poll_until(members, shared, got)
        assert group_type(admin, group) == "consumer"
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert sorted(m.client_id for m in desc.members) == ["classic", "consumer"]
        produce(bootstrap, 100, 200)
        poll_until(members, lambda: len(got) == 300, got)
        assert {got[v] for v in range(100, 300)} == {"classic", "consumer"}
        taken_from_classic = assigned(members)["consumer"]

        # the consumer-protocol member leaves: a classic group again, which rebalances
        members.pop("consumer").close()
        produce(bootstrap, 300, 100)
        poll_until(members, lambda: len(got) == 400 and
                   assigned(members)["classic"] == set(range(PARTITIONS)), got)
        assert sorted(got) == list(range(400))
        assert group_type(admin, group) == "classic"
        # the classic member resumed the partitions the consumer had where it had committed
        assert {got[v] for v in range(300, 400) if v % PARTITIONS in taken_from_classic} \
            == {"classic"}
    finally:
        for c in members.values():
            c.close()


def test_a_classic_member_joins_a_consumer_group_which_then_downgrades(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """The other way in: a consumer group with a member, a classic member's JoinGroup is
    served (Kafka 4, whatever the policy) and the two share the partitions; the consumer
    member leaves and the group becomes a classic group."""
    group = "mig-join"
    bootstrap = broker_factory("--set", "group.consumer.heartbeat.interval.ms=300").bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    members = {"consumer": member(bootstrap, group, "consumer", "consumer")}
    got: dict[int, str] = {}
    try:
        poll_until(members, lambda: assigned(members)["consumer"] == set(range(PARTITIONS)),
                   got)
        assert group_type(admin, group) == "consumer"
        members["classic"] = member(bootstrap, group, "classic", "classic")
        poll_until(members, lambda: all(len(ps) == PARTITIONS // 2
                                        for ps in assigned(members).values()), got)
        produce(bootstrap, 0, 200)
        poll_until(members, lambda: len(got) == 200, got)
        assert set(got.values()) == {"classic", "consumer"}
        members.pop("consumer").close()
        poll_until(members, lambda: assigned(members)["classic"] == set(range(PARTITIONS)),
                   got)
        assert group_type(admin, group) == "classic"
        produce(bootstrap, 200, 40)
        poll_until(members, lambda: len(got) == 240, got)
        assert sorted(got) == list(range(240))
    finally:
        for c in members.values():
            c.close()


def test_disabled_policy_keeps_the_classic_group(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """``group.consumer.migration.policy=disabled``: a consumer-protocol heartbeat into a
    classic group with members is GROUP_ID_NOT_FOUND (Kafka's answer)."""
    from floodmark.client.connection import KafkaConnection

    bootstrap = broker_factory("--set", "group.consumer.migration.policy=DISABLED").bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    members = {"classic": member(bootstrap, "mig-off", "classic", "classic")}
    try:
        poll_until(members, lambda: bool(assigned(members)["classic"]), {})
        conn = KafkaConnection(bootstrap)
        try:
            ans = conn.request(68, 1, {"group_id": "mig-off", "member_id": "m-1",
                                       "member_epoch": 0, "rebalance_timeout": 30000,
                                       "subscribed_topic_names": [TOPIC],
                                       "topic_partitions": []})
            assert int(ans.error_code) == int(KafkaError.GROUP_ID_NOT_FOUND)
            assert ans.error_message == "Group mig-off is not a consumer group"
            desc = conn.request(69, 1, {"group_ids": ["mig-off"],
                                        "include_authorized_operations": False})
            assert int(desc.groups[0].error_code) == int(KafkaError.GROUP_ID_NOT_FOUND)
        finally:
            conn.close()
        assert group_type(admin, "mig-off") == "classic"
    finally:
        members["classic"].close()
