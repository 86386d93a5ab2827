"""KIP-932 share groups with a real client: librdkafka's share consumer (confluent-kafka's
``ShareConsumer``, a preview in librdkafka 2.16). Two consumers of one share group share one
partition's records: every record is delivered, none twice. In explicit acknowledgement mode a
RELEASEd record comes back, a record whose acquisition lock ran out goes to another consumer,
and a broker restart in the middle loses nothing acknowledged and delivers nothing
acknowledged again. With ``share.isolation.level=read_committed`` aborted transactions are
never delivered."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection

pytestmark = pytest.mark.compat

SHARE = ("--set", "group.share.enable=true", "--set", "share.auto.offset.reset=earliest")
STALL_S = 30.0  # a test fails when no record arrives for this long


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, name: str, explicit: bool = False) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(config)
    c.subscribe([group + "-t"])
    return c


def records(c: ShareConsumer, timeout_s: float = 0.2) -> list[Message]:
    out = []
    for m in c.poll(timeout_s):
        assert m.error() is None, m.error()
        out.append(m)
    return out


def poll_until(c: ShareConsumer, done: Callable[[list[Message]], bool]) -> list[Message]:
    """Poll ``c`` until the records of one poll satisfy ``done``; fails when ``STALL_S``
    passes without that."""
    deadline = time.monotonic() + STALL_S
    for _ in range(10_000):
        got = records(c)
        if got and done(got):
            return got
        assert not got, f"unexpected records {[int(m.value()) for m in got]}"
        assert time.monotonic() < deadline, "no progress"
    raise AssertionError("poll budget spent")


@pytest.mark.timeout(120)
def test_two_consumers_share_one_partition(broker_factory: Any) -> None:
    b = broker_factory(*SHARE)
    group, topic, total = "shared", "shared-t", 300
    create(b.bootstrap, topic)
    members = [consumer(b.bootstrap, group, f"c{i}") for i in range(2)]
    got: dict[int, str] = {}
    produced = 0
    last_progress = time.monotonic()
    try:
        for turn in range(2_000):
            if len(got) == total and len(set(got.values())) == 2:
                break
            if produced < total and produced <= len(got):
                produce(b.bootstrap, topic, range(produced, produced + 30))
                produced += 30
            order = members if turn % 2 == 0 else members[::-1]
            for c in order:  # implicit mode: the last poll's records are accepted now
                for m in records(c):
                    value = int(m.value())
                    name = "c0" if c is members[0] else "c1"
                    assert value not in got, f"{value} delivered to {got[value]} and {name}"
                    got[value] = name
                    last_progress = time.monotonic()
            assert time.monotonic() - last_progress < STALL_S, f"stalled at {len(got)}"
        assert sorted(got) == list(range(total))
        assert set(got.values()) == {"c0", "c1"}, "both members get records"
    finally:
        for c in members:
            c.close()


@pytest.mark.timeout(150)
def test_release_lock_timeout_and_restart(broker_factory: Any) -> None:
    b = broker_factory(*SHARE, "--set", "group.share.record.lock.duration.ms=2000")
    group = "acks"
    topic = group + "-t"
    create(b.bootstrap, topic)
    produce(b.bootstrap, topic, range(10))
    c = consumer(b.bootstrap, group, "c", explicit=True)
    d = consumer(b.bootstrap, group, "d", explicit=True)
    try:
        # c releases record 0 and accepts the rest; 0 comes back
        first = poll_until(c, lambda ms: True)
        assert [int(m.value()) for m in first] == list(range(len(first)))
        for m in first:
            c.acknowledge(m, AcknowledgeType.RELEASE if int(m.value()) == 0
                          else AcknowledgeType.ACCEPT)
        c.commit_sync()
        accepted = {int(m.value()) for m in first} - {0}
        while len(accepted) < 9:  # the rest of 1..9, if the first poll did not hold them all
            for m in poll_until(c, lambda ms: True):
                if int(m.value()) == 0:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(int(m.value()))
            c.commit_sync()
        again = poll_until(c, lambda ms: True)
        assert [int(m.value()) for m in again] == [0], "the released record comes back"
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
        # c acquires 10..14 and stalls: when its locks run out, d gets them
        produce(b.bootstrap, topic, range(10, 15))
        held = poll_until(c, lambda ms: True)
        assert {int(m.value()) for m in held} <= set(range(10, 15))
        taken: set[int] = set()
        while not taken >= {int(m.value()) for m in held}:
            for m in poll_until(d, lambda ms: True):
                assert 10 <= int(m.value()) < 15
                taken.add(int(m.value()))
                d.acknowledge(m, AcknowledgeType.ACCEPT)
            d.commit_sync()
        # d accepts 15 and 16 of 15..19 and still holds 17..19 when the broker restarts
        produce(b.bootstrap, topic, range(15, 20))
        seen: set[int] = set()
        while not seen >= set(range(15, 20)):
            for m in poll_until(d, lambda ms: True):
                value = int(m.value())
                seen.add(value)
                if value not in (17, 18, 19):  # 15, 16 (and any of 10..14 c never held)
                    d.acknowledge(m, AcknowledgeType.ACCEPT)
            d.commit_sync()
        c.close()  # c held nothing any more: its locks ran out
        b.restart()
        e = consumer(b.bootstrap, group, "e")
        try:
            after: list[int] = []
            deadline = time.monotonic() + STALL_S * 2
            while sorted(after) != [17, 18, 19]:
                after += [int(m.value()) for m in records(e, 0.5)]
                assert not set(after) - {17, 18, 19}, f"acknowledged records came back: {after}"
                assert time.monotonic() < deadline, f"after the restart only {after}"
        finally:
            e.close()
    finally:
        c.close()  # closing twice is harmless
        d.close()


@pytest.mark.timeout(120)
def test_read_committed_skips_aborted_transactions(broker_factory: Any) -> None:
    """``share.isolation.level=read_committed``: records of an aborted transaction and the
    transaction markers are never acquired (ShareFetch's ``acquired_records``, asked with
    floodmark's own client); committed ones are, up to the last stable offset; the share
    consumer gets the committed records."""
    b = broker_factory(*SHARE, "--set", "share.isolation.level=read_committed")
    group = "txn"
    topic = group + "-t"
    create(b.bootstrap, topic)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "share-txn"})
    p.init_transactions(30)
    # offsets: c0 c1 c2 COMMIT(3) a0 a1 a2 ABORT(7) c3 end COMMIT(10)
    for values, commit in ((["c0", "c1", "c2"], True), (["a0", "a1", "a2"], False),
                           (["c3", "end"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v.encode(), partition=0)
        assert p.flush(30) == 0  # in the log before the abort (it would drop them unsent)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    with KafkaConnection(b.bootstrap, timeout_s=10) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                    "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
        resp = conn.request(78, 1, {
            "group_id": "txn-wire", "member_id": "m", "share_session_epoch": 0,
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
            "batch_size": 100, "forgotten_topics_data": [], "topics": [{
                "topic_id": meta.topics[0].topic_id, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": []}]}]})
        part = resp.responses[0].partitions[0]
        acquired = [o for a in part.acquired_records
                    for o in range(a.first_offset, a.last_offset + 1)]
        assert acquired == [0, 1, 2, 8, 9], acquired
    c = consumer(b.bootstrap, group, "c")
    got: list[str] = []
    try:
        deadline = time.monotonic() + STALL_S
        while "end" not in got:
            got += [m.value().decode() for m in records(c, 0.5)]
            assert time.monotonic() < deadline, f"only {got}"
        assert sorted(got) == ["c0", "c1", "c2", "c3", "end"], got
    finally:
        c.close()
