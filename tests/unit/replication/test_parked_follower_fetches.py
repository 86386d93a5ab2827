"""Parked follower fetches in the replication node (issue 25 §1): ``FollowerFetchPurgatory``
keeps them, ``ReplicaDriver.answer_parked_follower_fetches`` asks the core again for each and
answers it when the core has an answer (the leader appended), its wait is over, or the runner
forces it; the others stay parked, in order. Real storage over the memory file system."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.driver import FollowerFetchAnswer, ReplicaDriver
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.replication.follower_waits import FollowerFetchWaits
from floodmark.replication.partition import FollowerFetch, Partition, PartitionConfig
from floodmark.replication.produce import ProduceSettings, produce_as_leader
from floodmark.replication.purgatory import CompleteProduce, FollowerFetchPurgatory
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log


class Leader:
    """Broker 1 leading t-0 (replicas 1, 2, 3, leader epoch 5); the driver's ports do
    nothing: what is asserted is what the parked fetches are answered."""

    def __init__(self) -> None:
        fs = MemoryFileSystem()
        fs.mkdirs("/d/t-0")
        self.log = Log.open("/d/t-0", fs=fs, now_ms=0)
        self.core = Partition(PartitionConfig("t", 0, 1, min_insync_replicas=2))
        self.driver = ReplicaDriver(self.core, self.log, self)
        self.driver.apply(self.core.apply_metadata(
            self.log, PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 5, 0), 0))

    def complete_produce(self, done: CompleteProduce) -> None: ...
    def high_watermark_changed(self, old: int, new: int) -> None: ...
    def propose_isr(self, request: AlterPartitionRequest) -> None: ...
    def wake_follower_fetches(self) -> None: ...
    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None: ...
    def follower_appended(self, records: bytes | bytearray | memoryview) -> None: ...
    def flush_log(self) -> None: ...
    def checkpoint_high_watermark(self, high_watermark: int) -> None: ...

    def read(self, start: int, upto: int) -> bytes:
        return bytes(self.log.read(start, 1 << 20, upto).records)

    def produce(self, now_ms: int) -> None:
        out = produce_as_leader(self.core, self.log, simple_batch([b"v"]), acks=-1,
                                produce_id=1, now_ms=now_ms, timeout_ms=1000,
                                settings=ProduceSettings(), leadership_in_doubt=False,
                                stepped_down=False)
        self.driver.apply(out.effects)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A runner's parked fetch: the fetch and where its answer goes."""

    follower: str
    fetch: FollowerFetch


def caught_up(replica: int, offset: int) -> FollowerFetch:
    return FollowerFetch(replica, offset, 5, 5, 0)


Sent = list[tuple[str, FollowerFetchAnswer]]


def setup() -> tuple[Leader, FollowerFetchPurgatory[Waiting], Sent]:
    leader = Leader()
    parked: FollowerFetchPurgatory[Waiting] = FollowerFetchPurgatory()
    for name, replica in (("B", 2), ("C", 3)):
        answer = leader.driver.answer_follower_fetch(caught_up(replica, 0), 10, leader.read)
        assert not answer.complete  # nothing to send: it waits
        parked.park(Waiting(name, caught_up(replica, 0)), deadline_ms=500)
    return leader, parked, []


def test_an_append_answers_the_parked_fetches_with_the_records() -> None:
    leader, parked, sent = setup()
    asked = leader.driver.answer_parked_follower_fetches(
        parked, 20, leader.read, lambda w, a: sent.append((w.follower, a)))
    assert asked == 0 and len(parked) == 2 and not sent  # nothing new: both stay parked
    leader.produce(now_ms=30)
    asked = leader.driver.answer_parked_follower_fetches(
        parked, 30, leader.read, lambda w, a: sent.append((w.follower, a)))
    assert asked == 2 and len(parked) == 0
    assert [name for name, _a in sent] == ["B", "C"]  # in the order they were parked
    assert all(a.response.error is ErrorCode.NONE and a.records for _n, a in sent)


def test_a_wait_that_is_over_is_answered_empty_and_the_others_stay() -> None:
    leader, parked, sent = setup()
    parked.park(Waiting("D", caught_up(2, 0)), deadline_ms=100)
    asked = leader.driver.answer_parked_follower_fetches(
        parked, 100, leader.read, lambda w, a: sent.append((w.follower, a)))
    assert asked == 1 and [n for n, _a in sent] == ["D"] and not sent[0][1].records
    assert len(parked) == 2


def test_which_and_force_release_one_follower_by_hand() -> None:
    leader, parked, sent = setup()
    leader.driver.answer_parked_follower_fetches(
        parked, 20, leader.read, lambda w, a: sent.append((w.follower, a)),
        which=lambda w: w.follower == "C", force=True)
    assert [n for n, _a in sent] == ["C"] and len(parked) == 1
    assert parked.drop(lambda p: p.request.follower == "B") == 1 and len(parked) == 0


def test_a_fenced_parked_fetch_is_answered_with_the_error() -> None:
    leader, parked, sent = setup()
    parked.park(Waiting("B", FollowerFetch(2, 0, 5, 4, 0)), deadline_ms=500)  # epoch 4 < 5
    leader.driver.answer_parked_follower_fetches(
        parked, 20, leader.read, lambda w, a: sent.append((w.follower, a)))
    assert [a.response.error for _n, a in sent] == [ErrorCode.FENCED_LEADER_EPOCH]
    assert len(parked) == 2


def test_the_purgatory_is_bounded_and_knows_its_next_deadline() -> None:
    parked: FollowerFetchPurgatory[str] = FollowerFetchPurgatory(max_waiting=2)
    assert parked.next_deadline_ms() is None
    parked.park("a", 300)
    parked.park("b", 200)
    assert parked.next_deadline_ms() == 200
    with pytest.raises(OverflowError):
        parked.park("c", 100)


# -- FollowerFetchWaits: the wait around them, for a runner of one-partition fetches ------------
def waits(wait_ms: int | None) -> tuple[Leader, FollowerFetchWaits[Waiting], Sent]:
    leader = Leader()
    sent: Sent = []
    return leader, FollowerFetchWaits(leader.driver, leader.read,
                                      lambda w, a: sent.append((w.follower, a)), wait_ms), sent


def test_a_fetch_with_nothing_to_answer_waits_until_the_wake_after_an_append() -> None:
    leader, w, sent = waits(500)
    assert w.receive(Waiting("B", caught_up(2, 0)), 10) == 510  # parked until 510
    assert w.next_deadline_ms() == 510 and not sent
    w.after_step(20)  # not woken: nobody is asked
    assert not sent
    leader.produce(now_ms=30)  # the core says WakeFollowerFetches; the port is the runner's
    w.wake()
    w.after_step(30)
    assert [n for n, _a in sent] == ["B"] and sent[0][1].records
    assert w.next_deadline_ms() is None


def test_a_fetch_the_core_answers_at_once_is_not_parked_and_the_wait_ends_empty() -> None:
    _leader, w, sent = waits(500)
    fenced = Waiting("C", FollowerFetch(3, 0, 5, 4, 0))  # epoch 4 < 5
    assert w.receive(fenced, 10) is None
    assert [a.response.error for _n, a in sent] == [ErrorCode.FENCED_LEADER_EPOCH]
    w.receive(Waiting("B", caught_up(2, 0)), 20)
    w.tick(519)
    assert len(sent) == 1, "its wait is not over"
    w.tick(520)
    assert [n for n, _a in sent] == ["C", "B"] and not sent[1][1].records


def test_without_a_wait_a_fetch_stays_until_released_or_dropped() -> None:
    _leader, w, sent = waits(None)
    w.receive(Waiting("B", caught_up(2, 0)), 10)
    w.receive(Waiting("C", caught_up(3, 0)), 10)
    assert w.next_deadline_ms() is None
    w.tick(10**9)
    assert not sent
    assert w.answer(20, lambda p: p.follower == "C", force=True) == 1
    assert w.drop(lambda p: p.follower == "B") == 1 and not w.parked
