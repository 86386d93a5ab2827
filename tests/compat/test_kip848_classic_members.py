"""Classic protocol members of a KIP-848 consumer group, beside librdkafka's
``group.protocol=consumer`` members (confluent-kafka): Kafka's sync timeout (a classic member
that joined but never sends SyncGroup is removed after its rebalance timeout, though it goes on
heartbeating), its join timeout (told to rejoin, a member that never sends JoinGroup is removed
after it), static membership (a restarted librdkafka classic member under its
``group.instance.id`` takes its old place and partitions, without a new group epoch, and its
old member id is FENCED_INSTANCE_ID), and the group sizes: ``group.consumer.max.size``,
``group.max.size`` and ``group.share.max.size`` answered GROUP_MAX_SIZE_REACHED to a new
member of a full group, of each protocol.

The classic member whose timers are tested speaks the wire itself (``KafkaConnection``): a
real client cannot be made to heartbeat on without syncing or rejoining, which is the case
under test."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection
from floodmark.client.group import encode_subscription
from floodmark.wire.consumer_protocol import decode_assignment

pytestmark = pytest.mark.compat

TOPIC, PARTITIONS = "members", 4
REBALANCE_MS = 3_000  # the raw classic member's rebalance timeout
SESSION_MS = 30_000  # and its session: far longer, so only the join/sync timers can remove it
STALL_S = 30.0


def consumer(bootstrap: str, group: str, protocol: str, name: str,
             instance_id: str | None = None) -> Consumer:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group,
                            "client.id": name, "group.protocol": protocol,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                     "partition.assignment.strategy": "range"})
    if instance_id is not None:
        conf["group.instance.id"] = instance_id
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def poll_until(members: list[Consumer], done: Callable[[], bool], what: str,
               also: Callable[[], None] = lambda: None) -> None:
    """Poll every member until ``done()`` (``also`` runs between rounds); fails after
    ``STALL_S``."""
    deadline = time.monotonic() + STALL_S
    for _ in range(100_000):
        if done():
            return
        for c in members:
            m = c.poll(0.05)
            assert m is None or not m.error() or \
                m.error().code() == KafkaError._PARTITION_EOF, m.error()
        also()
        assert time.monotonic() < deadline, f"no {what} in {STALL_S} s"
    raise AssertionError("poll budget spent")


class RawClassicMember:
    """A classic consumer speaking JoinGroup/SyncGroup/Heartbeat itself (v5)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.conn = KafkaConnection(bootstrap, client_id="raw-classic")
        self.group = group
        self.member_id = ""
        self.generation = -1
        self.assigned: set[int] = set()

    def join(self) -> int:
        body = {"group_id": self.group, "session_timeout": SESSION_MS,
                "rebalance_timeout": REBALANCE_MS, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": encode_subscription([TOPIC])}]}
        r = self.conn.request(11, 5, body)
        if int(r.error_code) == int(KafkaError.MEMBER_ID_REQUIRED):
            self.member_id = str(r.member_id)
            r = self.conn.request(11, 5, {**body, "member_id": self.member_id})
        if int(r.error_code) == 0:
            self.member_id, self.generation = str(r.member_id), int(r.generation_id)
        return int(r.error_code)

    def sync(self) -> int:
        r = self.conn.request(14, 5, {"group_id": self.group, "generation_id": self.generation,
                                      "member_id": self.member_id, "group_instance_id": None,
                                      "protocol_type": "consumer", "protocol_name": "range",
                                      "assignments": []})
        if int(r.error_code) == 0:
            self.assigned = set(decode_assignment(bytes(r.assignment)).get(TOPIC, ()))
        return int(r.error_code)

    def step(self) -> int:
        """A well-behaved member's heartbeat: told to rejoin, it joins and syncs again."""
        err = self.heartbeat()
        if err == int(KafkaError.REBALANCE_IN_PROGRESS):
            assert self.join() == 0
            assert self.sync() in (0, int(KafkaError.REBALANCE_IN_PROGRESS))
        return err

    def heartbeat(self) -> int:
        r = self.conn.request(12, 4, {"group_id": self.group, "generation_id": self.generation,
                                      "member_id": self.member_id, "group_instance_id": None})
        return int(r.error_code)

    def heartbeat_until_removed(self, others: list[Consumer]) -> float:
        """Heartbeat every 300 ms (polling ``others`` meanwhile) until UNKNOWN_MEMBER_ID;
        the seconds it took."""
        t0 = time.monotonic()
        errors: list[int] = []

        def beat() -> None:
            if not errors or time.monotonic() - t0 > 0.3 * len(errors):
                errors.append(self.heartbeat())

        poll_until(others, lambda: bool(errors) and errors[-1] == int(
            KafkaError.UNKNOWN_MEMBER_ID), "removal of the raw classic member", beat)
        assert set(errors[:-1]) <= {0, int(KafkaError.REBALANCE_IN_PROGRESS)}, errors
        return time.monotonic() - t0


def describe(bootstrap: str, group: str) -> Any:
    conn = KafkaConnection(bootstrap)
    try:
        return conn.request(69, 1, {"group_ids": [group],
                                    "include_authorized_operations": False}).groups[0]
    finally:
        conn.close()


def setup(broker_factory: Any, *settings: str) -> str:
    bootstrap: str = broker_factory("--set", "group.consumer.heartbeat.interval.ms=300",
                                    *settings).bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    return bootstrap


@pytest.mark.timeout(120)
def test_a_classic_member_that_never_syncs_is_removed_after_its_rebalance_timeout(
        broker_factory: Any) -> None:
    bootstrap = setup(broker_factory)
    k = consumer(bootstrap, "sync-t", "consumer", "k")
    raw = RawClassicMember(bootstrap, "sync-t")
    try:
        poll_until([k], lambda: owned(k) == set(range(PARTITIONS)), "assignment of k")
        assert raw.join() == 0  # into the consumer group: answered, then no SyncGroup
        poll_until([k], lambda: len(owned(k)) == PARTITIONS // 2, "k giving up half")
        took_s = raw.heartbeat_until_removed([k])
        # the sync timeout (3 s from the join), not the 30 s session
        assert took_s < SESSION_MS / 1000 / 2, took_s
        poll_until([k], lambda: owned(k) == set(range(PARTITIONS)), "k taking all back")
        assert [m.member_id for m in describe(bootstrap, "sync-t").members] != [raw.member_id]
        assert len(describe(bootstrap, "sync-t").members) == 1
    finally:
        raw.conn.close()
        k.close()


@pytest.mark.timeout(120)
def test_a_classic_member_told_to_rejoin_that_never_joins_is_removed(
        broker_factory: Any) -> None:
    bootstrap = setup(broker_factory)
    k = consumer(bootstrap, "join-t", "consumer", "k")
    raw = RawClassicMember(bootstrap, "join-t")
    k2: Consumer | None = None
    try:
        poll_until([k], lambda: owned(k) == set(range(PARTITIONS)), "assignment of k")
        assert raw.join() == 0
        assert raw.sync() == 0  # nothing yet: k still holds its partitions
        # it heartbeats, and rejoins when told to, until it has its half
        poll_until([k], lambda: raw.step() == 0 and len(raw.assigned) == PARTITIONS // 2
                   and len(owned(k)) == PARTITIONS // 2, "k and the raw member sharing")
        # another consumer-protocol member: a new group epoch, the raw member must rejoin
        k2 = consumer(bootstrap, "join-t", "consumer", "k2")
        t0 = time.monotonic()
        took_s = raw.heartbeat_until_removed([k, k2])
        assert took_s < SESSION_MS / 1000 / 2, took_s  # the join timeout, not the session
        both = [k, k2]
        poll_until(both, lambda: owned(k) | owned(k2) == set(range(PARTITIONS))
                   and len(owned(k)) == len(owned(k2)) == PARTITIONS // 2,
                   "k and k2 sharing every partition")
        assert time.monotonic() - t0 < STALL_S
    finally:
        raw.conn.close()
        k.close()
        if k2 is not None:
            k2.close()


@pytest.mark.timeout(120)
def test_a_restarted_static_classic_member_takes_its_place_without_a_rebalance(
        broker_factory: Any) -> None:
    bootstrap = setup(broker_factory)
    k = consumer(bootstrap, "static-t", "consumer", "k")
    a2: Consumer | None = None
    # k first: a classic JoinGroup first would make a classic group that k upgrades, and the
    # JoinGroup parked there is answered REBALANCE_IN_PROGRESS (as Kafka answers it)
    poll_until([k], lambda: owned(k) == set(range(PARTITIONS)), "assignment of k")
    a = consumer(bootstrap, "static-t", "classic", "a", instance_id="a-1")
    try:
        poll_until([k, a], lambda: len(owned(k)) == len(owned(a)) == PARTITIONS // 2,
                   "k and a sharing")
        theirs, mine = owned(a), owned(k)
        before = describe(bootstrap, "static-t")
        old_id = next(m.member_id for m in before.members if m.instance_id == "a-1")
        a.close()  # a static member: no LeaveGroup, its place waits for it
        a = None  # type: ignore[assignment]
        a2 = consumer(bootstrap, "static-t", "classic", "a2", instance_id="a-1")
        poll_until([k, a2], lambda: owned(a2) == theirs, "a2 taking a's partitions")  # type: ignore[arg-type]
        after = describe(bootstrap, "static-t")
        new_id = next(m.member_id for m in after.members if m.instance_id == "a-1")
        assert new_id != old_id and len(after.members) == 2
        assert after.group_epoch == before.group_epoch  # nobody else rebalanced
        assert owned(k) == mine
        # the old incarnation is fenced
        conn = KafkaConnection(bootstrap)
        try:
            r = conn.request(12, 4, {"group_id": "static-t", "generation_id":
                                     before.group_epoch, "member_id": old_id,
                                     "group_instance_id": "a-1"})
            assert int(r.error_code) == int(KafkaError.FENCED_INSTANCE_ID)
        finally:
            conn.close()
    finally:
        k.close()
        for c in (a, a2):
            if c is not None:
                c.close()


def first_error(c: Consumer, others: list[Consumer]) -> KafkaError:
    deadline = time.monotonic() + STALL_S
    for _ in range(10_000):
        m = c.poll(0.1)
        if m is not None and m.error() and m.error().code() != KafkaError._PARTITION_EOF:
            return m.error()
        assert not c.assignment(), "a member past the group's size got partitions"
        for o in others:
            o.poll(0.01)
        assert time.monotonic() < deadline, "no error for a member past the group's size"
    raise AssertionError("poll budget spent")


@pytest.mark.timeout(150)
def test_group_sizes_are_answered_group_max_size_reached(broker_factory: Any) -> None:
    bootstrap = setup(broker_factory, "--set", "group.consumer.max.size=2",
                      "--set", "group.max.size=1", "--set", "group.share.enable=true",
                      "--set", "group.share.max.size=1")
    full = "Consumer group has reached maximum size"
    opened: list[Consumer] = []
    try:
        # a consumer group of two: one member of each protocol
        k = consumer(bootstrap, "sized", "consumer", "k")
        opened.append(k)
        poll_until([k], lambda: owned(k) == set(range(PARTITIONS)), "assignment of k")
        c = consumer(bootstrap, "sized", "classic", "c")
        opened.append(c)
        poll_until([k, c], lambda: len(owned(k)) == len(owned(c)) == PARTITIONS // 2,
                   "k and c sharing")
        for protocol in ("classic", "consumer"):
            third = consumer(bootstrap, "sized", protocol, f"third-{protocol}")
            opened.append(third)
            err = first_error(third, [k, c])
            if protocol == "classic":
                assert err.code() == KafkaError.GROUP_MAX_SIZE_REACHED, err
            else:  # librdkafka makes it fatal for a consumer-protocol member
                assert err.code() == KafkaError._FATAL and full in err.str(), err
        assert len(describe(bootstrap, "sized").members) == 2
        # a classic group of one (group.max.size)
        solo = consumer(bootstrap, "classic-sized", "classic", "solo")
        opened.append(solo)
        poll_until([solo], lambda: owned(solo) == set(range(PARTITIONS)), "solo's assignment")
        second = consumer(bootstrap, "classic-sized", "classic", "second")
        opened.append(second)
        assert first_error(second, [solo]).code() == KafkaError.GROUP_MAX_SIZE_REACHED
        assert owned(solo) == set(range(PARTITIONS))
    finally:
        for x in opened:
            x.close()
    # a share group of one (group.share.max.size)
    s1 = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "share-sized",
                        "client.id": "s1"})
    s1.subscribe([TOPIC])
    s2 = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "share-sized",
                        "client.id": "s2"})
    try:
        deadline = time.monotonic() + STALL_S
        while not describe_share_members(bootstrap, "share-sized"):
            s1.poll(0.1)
            assert time.monotonic() < deadline, "s1 never joined"
        s2.subscribe([TOPIC])
        with pytest.raises(KafkaException) as refused:
            for _ in range(1_000):
                s2.poll(0.1)
                s1.poll(0.01)
                assert time.monotonic() < deadline + STALL_S, "s2 was not refused"
        assert refused.value.args[0].code() == KafkaError.GROUP_MAX_SIZE_REACHED
        assert describe_share_members(bootstrap, "share-sized") == 1
    finally:
        s1.close()
        s2.close()


def describe_share_members(bootstrap: str, group: str) -> int:
    conn = KafkaConnection(bootstrap)
    try:
        g = conn.request(77, 1, {"group_ids": [group],
                                 "include_authorized_operations": False}).groups[0]
        return len(g.members) if int(g.error_code) == 0 else 0
    finally:
        conn.close()


def group_type(bootstrap: str, group: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for g in admin.list_consumer_groups().result(30).valid:
        if g.group_id == group:
            return str(g.type.name).lower()
    return "absent"


@pytest.mark.timeout(120)
def test_a_static_consumer_member_restarted_as_classic_downgrades_the_group(
        broker_factory: Any) -> None:
    """The rollback of a static member: its consumer-protocol process stops, a classic one
    starts under the same group.instance.id; it was the last consumer-protocol member, so the
    group is a classic group at once, and the classic members share the partitions."""
    bootstrap = setup(broker_factory)
    k = consumer(bootstrap, "rollback", "consumer", "k", instance_id="k-1")
    k2: Consumer | None = None
    poll_until([k], lambda: owned(k) == set(range(PARTITIONS)), "assignment of k")
    a = consumer(bootstrap, "rollback", "classic", "a", instance_id="a-1")
    try:
        poll_until([k, a], lambda: len(owned(k)) == len(owned(a)) == PARTITIONS // 2,
                   "k and a sharing")
        assert group_type(bootstrap, "rollback") == "consumer"
        k.close()  # a static consumer-protocol member: leaves with epoch -2, its place kept
        k = None  # type: ignore[assignment]
        k2 = consumer(bootstrap, "rollback", "classic", "k2", instance_id="k-1")
        poll_until([a, k2], lambda: group_type(bootstrap, "rollback") == "classic"
                   and owned(a) | owned(k2) == set(range(PARTITIONS))  # type: ignore[arg-type]
                   and not owned(a) & owned(k2), "a classic group of a and k2")  # type: ignore[arg-type]
    finally:
        for c in (k, a, k2):
            if c is not None:
                c.close()
