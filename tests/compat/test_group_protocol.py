"""The classic group protocol cases clients rely on, with real consumers (issue 9, Build 3).

* A member commits its positions in its revoke callback while the group prepares a rebalance
  (another member joined): Kafka accepts that commit (the member's generation is still the
  group's), so the next owner starts exactly where the first one stopped.
* A member that stops (SIGSTOP: a frozen process) misses the rebalance timeout: it is removed
  and the others get its partitions long before its session would expire; resumed, it comes
  back under a fresh member id and a new generation; a consumer killed outright (SIGKILL)
  leaves by session expiry. Committed offsets never go backwards and every record is read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.compat

WORKER = Path(__file__).with_name("group_worker.py")


def _create(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def _wait(done: Callable[[], bool], what: str, timeout_s: float = 60,
          step: Callable[[], None] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if step is not None:
            step()
        else:
            time.sleep(0.1)


def test_commit_in_revoke_during_rebalance_is_kept(broker) -> None:  # type: ignore[no-untyped-def]
    """The first member consumes part of every partition, a second member joins; the first
    one's revoke callback commits its positions during the join phase. Before the fix the
    coordinator answered REBALANCE_IN_PROGRESS and the second member re-read those records."""
    topic, group = "revoke-commit-t", "revoke-commit-g"
    _create(broker.bootstrap, topic, 4, 400)
    commit_errors: list[str] = []
    committed_at_revoke: dict[int, int] = {}

    def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
        if not parts:
            return
        positions = c.position(parts)
        try:
            for tp in c.commit(offsets=positions, asynchronous=False) or []:
                if tp.error is not None:
                    commit_errors.append(str(tp.error))
                else:
                    committed_at_revoke[tp.partition] = tp.offset
        except KafkaException as exc:
            commit_errors.append(str(exc))

    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "max.poll.interval.ms": 20000}
    a = Consumer({**conf, "client.id": "member-a"})
    a.subscribe([topic], on_revoke=on_revoke)
    seen_a: list[tuple[int, int]] = []
    # a reads about half of every partition (it owns all four)
    _wait(lambda: len(seen_a) >= 200 and len({p for p, _ in seen_a}) == 4, "a to read",
          step=lambda: _take(a, seen_a))
    a.pause(a.assignment())  # a keeps polling (callbacks, heartbeats) but reads no more
    b = Consumer({**conf, "client.id": "member-b"})
    b.subscribe([topic])
    seen_b: list[tuple[int, int]] = []
    _wait(lambda: bool(a.assignment()) and bool(b.assignment())
          and len(a.assignment()) + len(b.assignment()) == 4, "both members assigned",
          step=lambda: _take_both(a, seen_a, b, seen_b))
    assert commit_errors == []
    assert sorted(committed_at_revoke) == [0, 1, 2, 3]
    a.resume(a.assignment())
    # Both read to the end: every record exactly once (nothing re-read by the new owner).
    _wait(lambda: len(seen_a) + len(seen_b) >= 400, "all records",
          step=lambda: _take_both(a, seen_a, b, seen_b))
    for _ in range(10):
        _take(a, seen_a)
        _take(b, seen_b)
    everything = seen_a + seen_b
    assert len(everything) == len(set(everything)) == 400, "a record was read twice"
    a.close()
    b.close()


def _take_both(a: Consumer, seen_a: list[tuple[int, int]], b: Consumer,
               seen_b: list[tuple[int, int]]) -> None:
    """What each member has ready (up to 100 records, 50 ms at most each): one record per
    poll, with the other member idle, read 200 records in 5-10 s of waiting."""
    for c, into in ((a, seen_a), (b, seen_b)):
        for m in c.consume(100, 0.05):
            if m.error() is None:
                into.append((m.partition(), m.offset()))


def _take(c: Consumer, into: list[tuple[int, int]]) -> None:
    m = c.poll(0.05)
    if m is not None and m.error() is None:
        into.append((m.partition(), m.offset()))


class Worker:
    """One group_worker.py process and the events it printed."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str,
                 session_ms: int, max_poll_ms: int) -> None:
        self.client_id = client_id
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), bootstrap, group, topic, client_id, str(session_ms),
             str(max_poll_ms)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.events.append(json.loads(line))

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def assignment(self) -> set[int]:
        """Partitions of the last assignment it was given (what it believes it owns)."""
        last: set[int] = set()
        for e in self.snapshot():
            if e["event"] == "assigned":
                last = set(e["partitions"])
        return last

    def assignments_seen(self) -> int:
        return sum(1 for e in self.snapshot() if e["event"] == "assigned")

    def records(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.snapshot() if e["event"] == "record"]

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class CommitWatcher:
    """Reads the group's committed offsets over and over (confluent-kafka's AdminClient) and
    keeps every decrease it sees."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions

        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.request = [ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p) for p in range(partitions)])]
        self.group = group
        self.highest: dict[int, int] = {}
        self.decreases: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                res = self.admin.list_consumer_group_offsets(self.request)[self.group].result(10)
            except KafkaException:
                continue
            for tp in res.topic_partitions:
                if tp.offset < 0:
                    continue
                before = self.highest.get(tp.partition, -1)
                if tp.offset < before:
                    self.decreases.append(f"partition {tp.partition}: {before} -> {tp.offset}")
                self.highest[tp.partition] = max(before, tp.offset)
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def _member_ids(admin: AdminClient, group: str) -> dict[str, str]:
    desc = admin.describe_consumer_groups([group])[group].result(30)
    return {m.client_id: m.member_id for m in desc.members}


def test_frozen_member_misses_rebalance_timeout_killed_member_expires(broker) -> None:  # type: ignore[no-untyped-def]
    """kafka-python workers: a (rebalance timeout 6 s, session 30 s) and b, c (session and
    rebalance timeout 6 s, the broker's group.min.session.timeout.ms: the group's rebalance
    timeout is its members' longest). a is frozen and c joins: a is removed at the rebalance
    timeout, well before its session would end; resumed, a rejoins under a new member id. Then
    c is SIGKILLed: its session expires and a and b take its partitions. Committed offsets
    never decrease; every record produced is read."""
    topic, group, parts = "frozen-member-t", "frozen-member-g", 4
    _create(broker.bootstrap, topic, parts, 400)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    watcher = CommitWatcher(broker.bootstrap, group, topic, parts)
    workers: list[Worker] = []
    try:
        a = Worker(broker.bootstrap, group, topic, "worker-a", 30000, 6000)
        b = Worker(broker.bootstrap, group, topic, "worker-b", 6000, 6000)
        workers += [a, b]

        def owners(*ws: Worker) -> bool:
            sets = [w.assignment() for w in ws]
            return (all(sets) and sum(len(s) for s in sets) == parts
                    and set().union(*sets) == set(range(parts)))

        _wait(lambda: owners(a, b), "a and b to share the partitions", 60)
        a_id = _member_ids(admin, group)["worker-a"]
        a.signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        b_assignments = b.assignments_seen()
        c = Worker(broker.bootstrap, group, topic, "worker-c", 6000, 6000)
        workers.append(c)
        _wait(lambda: b.assignments_seen() > b_assignments and owners(b, c),
              "b and c to take every partition", 60)
        removed_after_s = time.monotonic() - frozen_at
        assert removed_after_s < 25, (
            f"the frozen member was removed after {removed_after_s:.1f}s: by its 30 s session, "
            f"not by the 6 s rebalance timeout")
        assert "worker-a" not in _member_ids(admin, group)
        a_assignments = a.assignments_seen()
        a.signal(signal.SIGCONT)
        _wait(lambda: a.assignments_seen() > a_assignments and owners(a, b, c),
              "a to rejoin", 90)
        new_a_id = _member_ids(admin, group).get("worker-a")
        assert new_a_id is not None and new_a_id != a_id, "the late rejoin kept its member id"
        c.signal(signal.SIGKILL)
        _wait(lambda: "worker-c" not in _member_ids(admin, group) and owners(a, b),
              "c's session to expire and a, b to take its partitions", 60)
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(400, 800):
            p.produce(topic, value=b"%d" % i, partition=i % parts)
        assert p.flush(30) == 0
        every = {(i % parts, i // parts) for i in range(800)}
        _wait(lambda: every <= set(a.records() + b.records() + c.records()),
              "every record to be read", 60)
        _wait(lambda: sum(watcher.highest.values()) >= 800, "the last commits", 30)
    finally:
        for w in workers:
            w.stop()
        watcher.stop()
    assert watcher.decreases == [], watcher.decreases
    assert watcher.highest == {p: 200 for p in range(parts)}
