"""The leader's produce path (``replication/produce.py``): a retried idempotent batch already in
the log waits for the high watermark exactly like the original (issue 8), and the refusals come in
Kafka's order. Real storage over the memory file system; followers are driven by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.replication.partition import (
    Effect,
    FollowerFetch,
    Partition,
    PartitionConfig,
)
from floodmark.replication.produce import LeaderProduce, ProduceSettings, produce_as_leader
from floodmark.replication.purgatory import CompleteProduce
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log

PID = 4242


class Leader:
    """Broker 1 leading t-0 with replicas (1, 2, 3), ISR all three, min.insync.replicas=2."""

    def __init__(self, settings: ProduceSettings | None = None) -> None:
        fs = MemoryFileSystem()
        fs.mkdirs("/d/t-0")
        self.log = Log.open("/d/t-0", fs=fs, now_ms=0)
        self.core = Partition(PartitionConfig("t", 0, 1, min_insync_replicas=2))
        self.settings = settings or ProduceSettings()
        self.completed: list[CompleteProduce] = []
        self.next_id = 0
        self.driver = ReplicaDriver(self.core, self.log, self)
        self.apply(self.core.apply_metadata(
            self.log, PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 5, 0), 0))

    def apply(self, effects: list[Effect] | tuple[Effect, ...]) -> None:
        self.driver.apply(effects)

    # the driver's ports: only completions matter here
    def complete_produce(self, done: CompleteProduce) -> None:
        self.completed.append(done)

    def high_watermark_changed(self, old: int, new: int) -> None:
        pass

    def propose_isr(self, request: AlterPartitionRequest) -> None:
        pass

    def wake_follower_fetches(self) -> None:
        pass

    def log_truncated(self, before: int, after: int, reason: str, *, fully: bool) -> None:
        pass

    def follower_appended(self, records: bytes | bytearray | memoryview) -> None:
        pass

    def produce(self, sequence: int, value: bytes = b"v", acks: int = -1,
                now_ms: int = 10, pid: int = PID, in_doubt: bool = False,
                transactional: bool = False, stepped_down: bool = False) -> LeaderProduce:
        self.next_id += 1
        batch = simple_batch([value], producer_id=pid, producer_epoch=0, base_sequence=sequence,
                             is_transactional=transactional)
        out = produce_as_leader(self.core, self.log, batch, acks=acks,
                                produce_id=self.next_id, now_ms=now_ms, timeout_ms=1000,
                                settings=self.settings, leadership_in_doubt=in_doubt,
                                stepped_down=stepped_down)
        self.apply(out.effects)
        return out

    def follower_fetch(self, replica: int, offset: int, now_ms: int = 20) -> None:
        decision = self.core.handle_follower_fetch(
            self.log, FollowerFetch(replica, offset, 5, 5, 0), now_ms)
        assert decision.error is ErrorCode.NONE
        self.apply(decision.effects)

    def answers(self, produce_id: int) -> list[ErrorCode]:
        return [c.error for c in self.completed if c.produce_id == produce_id]

    def set_isr(self, isr: tuple[int, ...], partition_epoch: int, now_ms: int = 30) -> None:
        """The controller committed a new ISR; broker 1 stays leader in the same epoch."""
        self.apply(self.core.apply_metadata(
            self.log, PartitionRegistration((1, 2, 3), isr, 1, 5, partition_epoch), now_ms))


def test_retry_of_an_uncommitted_batch_waits_for_the_high_watermark() -> None:
    leader = Leader()
    first = leader.produce(0)
    assert first.parked and first.base_offset == 0
    retry = leader.produce(0)  # the client timed out and sent the same (pid, epoch, sequence)
    assert retry.duplicate and retry.base_offset == 0
    assert retry.parked, "a duplicate must not be acknowledged before the HW covers it"
    assert leader.log.log_end_offset == 1  # nothing appended twice
    assert leader.core.high_watermark == 0
    leader.follower_fetch(2, 1)
    leader.follower_fetch(3, 1)
    assert leader.core.high_watermark == 1
    assert leader.answers(first.produce_id) == [ErrorCode.NONE]
    assert leader.answers(retry.produce_id) == [ErrorCode.NONE]


def test_retry_of_a_committed_batch_is_answered_at_once_with_the_original_offset() -> None:
    leader = Leader()
    leader.produce(0)
    leader.follower_fetch(2, 1)
    leader.follower_fetch(3, 1)
    retry = leader.produce(0)
    assert retry.duplicate and retry.answer is ErrorCode.NONE and retry.base_offset == 0


def test_parked_duplicate_times_out_or_fails_when_leadership_is_lost() -> None:
    leader = Leader()
    leader.produce(0)
    retry = leader.produce(0)
    leader.apply(leader.core.expire_produces(10 + 1000))
    assert leader.answers(retry.produce_id) == [ErrorCode.REQUEST_TIMED_OUT]
    again = leader.produce(0, now_ms=2000)
    assert again.parked
    leader.apply(leader.core.apply_metadata(
        leader.log, PartitionRegistration((1, 2, 3), (2, 3), 2, 6, 1), 2001))
    assert leader.answers(again.produce_id) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_unsafe_switch_brings_the_old_behaviour_back() -> None:
    leader = Leader(ProduceSettings(unsafe_ack_duplicates_before_commit=True))
    leader.produce(0)
    retry = leader.produce(0)
    assert retry.duplicate and retry.answer is ErrorCode.NONE  # acknowledged, HW still 0
    assert leader.core.high_watermark == 0


def test_acks_one_duplicate_answers_at_once() -> None:
    leader = Leader()
    assert leader.produce(0, acks=1).answer is ErrorCode.NONE
    retry = leader.produce(0, acks=1)
    assert retry.duplicate and retry.answer is ErrorCode.NONE and retry.base_offset == 0


@pytest.mark.parametrize(
    ("acks", "expected"), [(2, ErrorCode.INVALID_REQUIRED_ACKS), (-2, ErrorCode.INVALID_REQUIRED_ACKS)]
)
def test_invalid_acks(acks: int, expected: ErrorCode) -> None:
    assert Leader().produce(0, acks=acks).answer is expected


def test_refusals_before_append() -> None:
    leader = Leader()
    assert leader.produce(3).answer is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # unknown pid, seq 3
    two = simple_batch([b"a"], producer_id=PID, producer_epoch=0, base_sequence=0) * 2
    out = produce_as_leader(leader.core, leader.log, two, acks=-1,
                            produce_id=99, now_ms=0, timeout_ms=1000)
    assert out.answer is ErrorCode.INVALID_RECORD
    out = produce_as_leader(leader.core, leader.log, b"junk", acks=-1,
                            produce_id=100, now_ms=0, timeout_ms=1000)
    assert out.answer is ErrorCode.CORRUPT_MESSAGE
    assert leader.log.log_end_offset == 0


# -- issue 13, finding 6: a retry of a batch in the log is never told NOT_ENOUGH_REPLICAS -------
# NOT_ENOUGH_REPLICAS means "nothing appended": librdkafka marks the batch not persisted and may
# resend it under a bumped producer epoch, which no broker can recognise as a duplicate.


def test_uncommitted_retry_below_min_isr_waits_for_the_high_watermark() -> None:
    leader = Leader()
    first = leader.produce(0)
    assert first.parked
    leader.set_isr((1,), 1)  # below min.insync.replicas=2
    retry = leader.produce(0)
    assert retry.answer is not ErrorCode.NOT_ENOUGH_REPLICAS
    assert retry.duplicate and retry.parked and retry.base_offset == 0
    assert leader.produce(1, b"new").answer is ErrorCode.NOT_ENOUGH_REPLICAS  # not in the log
    assert leader.log.log_end_offset == 1 and leader.core.high_watermark == 0
    leader.set_isr((1, 2), 2, now_ms=40)  # the ISR grows back
    leader.follower_fetch(2, 1, now_ms=50)
    assert leader.core.high_watermark == 1
    assert leader.answers(first.produce_id) == [ErrorCode.NONE]
    assert leader.answers(retry.produce_id) == [ErrorCode.NONE]
    assert leader.completed[-1].base_offset == 0  # the original offset, written once
    assert leader.log.log_end_offset == 1


def test_uncommitted_retry_below_min_isr_times_out_possibly_persisted() -> None:
    """If the ISR does not grow back in time the retry is answered REQUEST_TIMED_OUT (possibly
    persisted to every client), or NOT_LEADER_OR_FOLLOWER if leadership moves: never NER."""
    leader = Leader()
    leader.produce(0)
    leader.set_isr((1,), 1)
    retry = leader.produce(0, now_ms=100)
    leader.apply(leader.core.expire_produces(100 + 1000))
    assert leader.answers(retry.produce_id) == [ErrorCode.REQUEST_TIMED_OUT]
    again = leader.produce(0, now_ms=1200)
    assert again.parked
    leader.apply(leader.core.apply_metadata(
        leader.log, PartitionRegistration((1, 2, 3), (2,), 2, 6, 2), 1300))
    assert leader.answers(again.produce_id) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_committed_retry_below_min_isr_is_answered_at_once() -> None:
    leader = Leader()
    first = leader.produce(0)
    leader.follower_fetch(2, 1)
    leader.follower_fetch(3, 1)
    assert leader.answers(first.produce_id) == [ErrorCode.NONE]
    leader.set_isr((1,), 1)
    retry = leader.produce(0)
    assert retry.duplicate and retry.answer is ErrorCode.NONE and retry.base_offset == 0
    assert leader.produce(1).answer is ErrorCode.NOT_ENOUGH_REPLICAS


def test_transactional_retry_below_min_isr_is_not_refused() -> None:
    leader = Leader()
    leader.produce(0, transactional=True)
    leader.set_isr((1,), 1)
    retry = leader.produce(0, transactional=True)
    assert retry.duplicate and retry.parked
    assert leader.produce(1, transactional=True).answer is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log.log_end_offset == 1


def test_retry_at_a_leader_in_doubt_below_min_isr() -> None:
    """A leader in doubt answers a duplicate as any leader (it waits for the HW); a gap with the
    ISR below min ISR is NOT_ENOUGH_REPLICAS (nothing appended), checked before the sequence."""
    leader = Leader()
    leader.produce(0)
    leader.set_isr((1,), 1)
    retry = leader.produce(0, in_doubt=True)
    assert retry.duplicate and retry.parked
    assert leader.produce(4, in_doubt=True).answer is ErrorCode.NOT_ENOUGH_REPLICAS


def test_unsafe_switch_still_acknowledges_below_min_isr() -> None:
    leader = Leader(ProduceSettings(unsafe_ack_duplicates_before_commit=True))
    leader.produce(0)
    leader.set_isr((1,), 1)
    retry = leader.produce(0)
    assert retry.duplicate and retry.answer is ErrorCode.NONE and leader.core.high_watermark == 0


def test_acks_one_retry_below_min_isr_answers_at_once() -> None:
    leader = Leader()
    assert leader.produce(0, acks=1).answer is ErrorCode.NONE
    leader.set_isr((1,), 1)
    retry = leader.produce(0, acks=1)
    assert retry.duplicate and retry.answer is ErrorCode.NONE and retry.base_offset == 0


def test_malformed_request_below_min_isr_gets_its_own_error() -> None:
    """The request's own errors come before NOT_ENOUGH_REPLICAS (a retry has to be parsed to be
    recognised); nothing is appended either way."""
    leader = Leader()
    leader.set_isr((1,), 1)
    out = produce_as_leader(leader.core, leader.log, b"junk", acks=-1,
                            produce_id=100, now_ms=0, timeout_ms=1000)
    assert out.answer is ErrorCode.CORRUPT_MESSAGE
    plain = simple_batch([b"p"])
    out = produce_as_leader(leader.core, leader.log, plain, acks=-1,
                            produce_id=101, now_ms=0, timeout_ms=1000)
    assert out.answer is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log.log_end_offset == 0


def test_acks_all_during_a_pending_shrink_waits_for_the_larger_isr() -> None:
    """While an ISR shrink is only proposed, the HW still counts the replica being removed (the
    maximal ISR): nothing is acknowledged on the strength of the smaller ISR until the controller
    has committed it."""
    leader = Leader()
    leader.core.config = replace(leader.core.config, replica_lag_time_max_ms=100)
    leader.follower_fetch(2, 0, now_ms=0)
    leader.follower_fetch(3, 0, now_ms=0)
    out = leader.produce(0, now_ms=10)
    leader.follower_fetch(2, 1, now_ms=150)  # replica 3 stays behind past the lag time
    proposals = leader.core.maybe_shrink_isr(leader.log, 200)
    assert proposals and leader.core.isr == (1, 2, 3)  # proposed, not committed
    assert leader.core.high_watermark == 0 and out.parked
    assert leader.answers(out.produce_id) == []
    retry = leader.produce(0, now_ms=210)
    assert retry.parked
    leader.apply(leader.core.apply_metadata(
        leader.log, PartitionRegistration((1, 2, 3), (1, 2), 1, 5, 1), 220))
    assert leader.core.high_watermark == 1
    assert leader.answers(out.produce_id) == [ErrorCode.NONE]
    assert leader.answers(retry.produce_id) == [ErrorCode.NONE]


def test_a_sequence_gap_at_a_leader_in_doubt_is_not_leader_not_out_of_order() -> None:
    """A leader whose controller session lapsed (replication/controller_session.py) cannot tell a
    skipped sequence from sequences a newer leader took: it answers the retriable
    NOT_LEADER_OR_FOLLOWER, not the OUT_OF_ORDER_SEQUENCE_NUMBER librdkafka treats as fatal.
    Everything else it answers as before: in-sequence writes are appended (and wait for the HW),
    so a cluster whose controllers are down keeps serving."""
    leader = Leader()
    assert leader.produce(0, acks=1).answer is ErrorCode.NONE
    assert leader.produce(5, acks=1).answer is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    out = leader.produce(5, acks=1, in_doubt=True)
    assert out.answer is ErrorCode.NOT_LEADER_OR_FOLLOWER and out.error_message
    assert leader.produce(3, acks=1, pid=PID + 1, in_doubt=True).answer \
        is ErrorCode.NOT_LEADER_OR_FOLLOWER  # a producer it never saw, mid-sequence
    assert leader.log.log_end_offset == 1
    assert leader.produce(1, acks=1, in_doubt=True).answer is ErrorCode.NONE
    assert leader.produce(1, acks=1, in_doubt=True).duplicate  # a retry is still a duplicate
    assert leader.log.log_end_offset == 2
