"""The rules around the partition core that the broker, the simulator and the model checker
share: the consumer read rule (``replication.reads``), the answer to a follower fetch and its
re-asking when parked (``ReplicaDriver.answer_follower_fetch``), and the ``WakeFollowerFetches``
effect that an append or a lost leadership returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.constants import ACKS_LEADER
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication.driver import FollowerFetchAnswer, follower_fetch_response
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.epochs import EpochCache, EpochEndOffset
from floodmark.replication.partition import (
    FetchDecision,
    FetchResponse,
    FollowerFetch,
    Partition,
    PartitionConfig,
    WakeFollowerFetches,
)
from floodmark.replication.producer_state import AbortedTxn
from floodmark.replication.reads import FetchIsolation, read_bound, read_for_fetch


@dataclass(frozen=True)
class Read:
    records: bytes
    next_offset: int
    file_slice: object = None


@dataclass
class Log:
    log_start_offset: int = 0
    log_end_offset: int = 10
    epoch_cache: EpochCache = field(default_factory=EpochCache)
    aborted: list[AbortedTxn] = field(default_factory=list)
    reads: list[tuple[int, int, int | None]] = field(default_factory=list)
    fail: bool = False

    def read(self, start_offset: int, max_bytes: int, max_offset_exclusive: int | None = None,
             *, lazy_min_bytes: int | None = None) -> Read:
        if self.fail:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk")
        self.reads.append((start_offset, max_bytes, max_offset_exclusive))
        end = self.log_end_offset if max_offset_exclusive is None else max_offset_exclusive
        return Read(b"x" * (end - start_offset), end)

    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        return [a for a in self.aborted
                if a.last_offset >= fetch_offset and a.first_offset < upper_bound_offset]


def leader(hw: int = 6, epoch: int = 3) -> Partition:
    p = Partition(PartitionConfig("t", 0, 1))
    p.apply_metadata(Log(), PartitionRegistration((1, 2), (1, 2), 1, epoch, 0), 0)
    p.high_watermark = hw
    return p


def test_the_bound_by_isolation() -> None:
    p, log = leader(hw=6), Log()
    assert read_bound(p, log, 2, 3, FetchIsolation.HIGH_WATERMARK).read_upto == 6
    assert read_bound(p, log, 2, -1, FetchIsolation.LOG_END).read_upto == 10
    assert read_bound(p, log, 2, 3, FetchIsolation.TXN_COMMITTED).read_upto == p.last_stable_offset
    at_hw = read_bound(p, log, 6, 3, FetchIsolation.HIGH_WATERMARK)
    assert at_hw.error is ErrorCode.NONE and not at_hw.has_data
    assert FetchIsolation.of(2, True) is FetchIsolation.LOG_END
    assert FetchIsolation.of(-1, True) is FetchIsolation.TXN_COMMITTED
    assert FetchIsolation.of(-1, False) is FetchIsolation.HIGH_WATERMARK


def test_fenced_and_out_of_range_reads() -> None:
    p, log = leader(epoch=3), Log(log_start_offset=2)
    fenced = read_bound(p, log, 4, 2, FetchIsolation.HIGH_WATERMARK)
    assert fenced.error is ErrorCode.FENCED_LEADER_EPOCH and fenced.high_watermark == -1
    assert read_bound(p, log, 4, 4, FetchIsolation.HIGH_WATERMARK).error is (
        ErrorCode.UNKNOWN_LEADER_EPOCH)
    for offset in (1, 11):
        out = read_bound(p, log, offset, 3, FetchIsolation.HIGH_WATERMARK)
        assert out.error is ErrorCode.OFFSET_OUT_OF_RANGE
        assert (out.log_start_offset, out.log_end_offset, out.high_watermark) == (2, 10, 6)
    follower = Partition(PartitionConfig("t", 0, 2))
    follower.apply_metadata(Log(), PartitionRegistration((1, 2), (1, 2), 1, 3, 0), 0)
    assert read_bound(follower, log, 4, -1, FetchIsolation.HIGH_WATERMARK).error is (
        ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert log.reads == []


def test_read_for_fetch_reads_the_bound_and_the_aborted_list() -> None:
    p = leader(hw=6)
    log = Log(aborted=[AbortedTxn(7, 1, 3, 4), AbortedTxn(8, 8, 9, 10)])
    plain = read_for_fetch(p, log, 2, 3, FetchIsolation.HIGH_WATERMARK, 100)
    assert plain.records is not None and plain.records.next_offset == 6
    assert plain.aborted is None and log.reads == [(2, 100, 6)]
    committed = read_for_fetch(p, log, 2, 3, FetchIsolation.TXN_COMMITTED, 100)
    assert committed.aborted == (AbortedTxn(7, 1, 3, 4),)
    # Nothing to read (at the bound, or no room left in the response): an empty aborted list.
    assert read_for_fetch(p, log, 6, 3, FetchIsolation.TXN_COMMITTED, 100).aborted == ()
    full = read_for_fetch(p, log, 2, 3, FetchIsolation.TXN_COMMITTED, None)
    assert full.records is None and full.aborted == () and len(log.reads) == 2
    log.fail = True
    failed = read_for_fetch(p, log, 2, 3, FetchIsolation.HIGH_WATERMARK, 100)
    assert failed.error is ErrorCode.KAFKA_STORAGE_ERROR and failed.bound.high_watermark == 6


def test_follower_fetch_response_and_completeness() -> None:
    fetch = FollowerFetch(2, 5, 3, 3, 0)
    ok = FetchDecision(ErrorCode.NONE, 3, 4, 0, 7, read_from=5, read_upto=7)
    response = follower_fetch_response(ok, fetch, b"rr")
    assert response == FetchResponse(ErrorCode.NONE, 3, 4, 0, 7, None, has_records=True,
                                     fetch_offset=5)
    assert FollowerFetchAnswer(ok, response, b"rr").complete
    idle = FetchDecision(ErrorCode.NONE, 3, 4, 0, 5, read_from=5, read_upto=5)
    assert not FollowerFetchAnswer(idle, follower_fetch_response(idle, fetch, b""), b"").complete
    oor = FetchDecision(ErrorCode.OFFSET_OUT_OF_RANGE, 3, 4, 2, 3)
    answer = follower_fetch_response(oor, fetch, b"")
    assert answer.high_watermark == -1 and (answer.log_start_offset, answer.log_end_offset) == (
        2, 3)
    diverging = FetchDecision(ErrorCode.NONE, 3, 4, 0, 7, diverging=EpochEndOffset(2, 4))
    assert FollowerFetchAnswer(diverging, follower_fetch_response(diverging, fetch, b""),
                               b"").complete


def test_an_append_and_a_lost_leadership_wake_the_parked_follower_fetches() -> None:
    p, log = leader(hw=0), Log()
    effects = p.on_leader_append(log, 1, ACKS_LEADER, 9, 9, 0, 1000)
    assert isinstance(effects[-1], WakeFollowerFetches)
    moved = p.apply_metadata(log, PartitionRegistration((1, 2), (1, 2), 2, 4, 1), 0)
    assert any(isinstance(e, WakeFollowerFetches) for e in moved)
    # A follower that follows a new leader has no parked follower fetches to wake.
    again = p.apply_metadata(log, PartitionRegistration((1, 2), (1, 2), 2, 5, 2), 0)
    assert not any(isinstance(e, WakeFollowerFetches) for e in again)
    assert not any(isinstance(e, WakeFollowerFetches) for e in p.resign())
