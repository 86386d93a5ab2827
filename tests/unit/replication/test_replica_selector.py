"""Fetching from the closest replica (KIP-392): the rack-aware selector
(``replication.replica_selector``) and the consumer read rule on a follower
(``replication.reads`` with ``leader_only=False``), as Kafka 4.x answers."""

from __future__ import annotations

from tests.unit.replication.test_replication_reads import Log

from floodmark.errors import ErrorCode
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.isr import ReplicaState
from floodmark.replication.partition import Partition, PartitionConfig
from floodmark.replication.reads import FetchIsolation, read_bound, read_for_fetch
from floodmark.replication.replica_selector import (
    ReplicaSelection,
    ReplicaView,
    preferred_read_replica,
    rack_aware_select,
)

HW = FetchIsolation.HIGH_WATERMARK
RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def replica(broker_id: int, *, replicas: tuple[int, ...] = (1, 2, 3),
            isr: tuple[int, ...] = (1, 2, 3), epoch: int = 5, hw: int = 6) -> Partition:
    """Broker ``broker_id``'s replica of a partition led by broker 1."""
    p = Partition(PartitionConfig("t", 0, broker_id))
    p.apply_metadata(Log(), PartitionRegistration(replicas, isr, 1, epoch, 0), 0)
    p.high_watermark = hw
    return p


def caught_up(p: Partition, broker_id: int, leo: int, *, start: int = 0,
              caught_up_ms: int = 1000, broker_epoch: int = -1) -> None:
    p.replica_states[broker_id] = ReplicaState(broker_id, log_end_offset=leo,
                                               log_start_offset=start,
                                               last_caught_up_time_ms=caught_up_ms,
                                               broker_epoch=broker_epoch)


def selection(rack: str, racks: dict[int, str | None] | None = None,
              now_ms: int = 2000) -> ReplicaSelection:
    return ReplicaSelection(rack, RACKS if racks is None else racks, now_ms)


# -- the selector ------------------------------------------------------------------------------
def test_rack_aware_select_prefers_leader_in_rack_then_most_caught_up() -> None:
    leader = ReplicaView(1, "a", 10, 0)
    b_behind, b_ahead = ReplicaView(2, "b", 8, 0), ReplicaView(4, "b", 10, 500)
    assert rack_aware_select("a", leader, (b_behind, b_ahead)) == 1  # the leader is in rack a
    assert rack_aware_select("b", leader, (b_behind, b_ahead)) == 4  # highest log end offset
    assert rack_aware_select("c", leader, (b_behind,)) == 1  # nobody in rack c
    assert rack_aware_select("", leader, (b_behind,)) == 1  # no rack given
    # same log end offset: the most recently caught up, then the highest broker id
    recent = ReplicaView(2, "b", 10, 100)
    assert rack_aware_select("b", leader, (recent, b_ahead)) == 2
    assert rack_aware_select("b", leader, (ReplicaView(2, "b", 10, 500), b_ahead)) == 4


def test_preferred_replica_only_in_sync_live_followers_holding_the_offset() -> None:
    p = replica(1, replicas=(1, 2, 3, 4), isr=(1, 2, 3, 4))
    caught_up(p, 2, 10)
    caught_up(p, 3, 10)
    caught_up(p, 4, 7)
    assert preferred_read_replica(p, 10, 5, selection("b")) == 2  # 2 is ahead of 4
    assert preferred_read_replica(p, 10, 9, selection("b")) == 2
    assert preferred_read_replica(p, 10, 5, selection("a")) == -1  # the leader's own rack
    # a follower whose log does not reach the offset is no candidate
    assert preferred_read_replica(p, 10, 8, selection("b", {1: "a", 4: "b"})) == -1
    # a broker without an endpoint (dead) is no candidate
    assert preferred_read_replica(p, 10, 5, selection("c", {1: "a", 2: "b"})) == -1
    # below a follower's log start: not there either
    caught_up(p, 3, 10, start=6)
    assert preferred_read_replica(p, 10, 5, selection("c")) == -1
    assert preferred_read_replica(p, 10, 6, selection("c")) == 3


def test_out_of_sync_follower_is_never_preferred() -> None:
    p = replica(1, isr=(1, 3))
    caught_up(p, 2, 10)
    caught_up(p, 3, 10)
    assert preferred_read_replica(p, 10, 5, selection("b")) == -1
    assert preferred_read_replica(p, 10, 5, selection("c")) == 3


def test_a_follower_never_redirects() -> None:
    f = replica(2)
    assert preferred_read_replica(f, 10, 5, selection("c")) == -1


# -- the leader's answer -----------------------------------------------------------------------
def test_leader_answers_preferred_replica_without_records() -> None:
    p, log = replica(1), Log()
    caught_up(p, 2, 10)
    caught_up(p, 3, 10)
    read = read_for_fetch(p, log, 4, 5, HW, 1000, leader_only=False, selection=selection("b"))
    assert read.error is ErrorCode.NONE and read.records is None and not log.reads
    assert read.bound.preferred_read_replica == 2 and read.bound.high_watermark == 6
    # a fenced request is fenced first; no redirect
    assert read_bound(p, log, 4, 4, HW, leader_only=False,
                      selection=selection("b")).error is ErrorCode.FENCED_LEADER_EPOCH
    # the leader in the consumer's rack, or no selector: it reads itself
    assert read_bound(p, log, 4, 5, HW, selection=selection("a")).preferred_read_replica == -1
    assert read_bound(p, log, 4, 5, HW, leader_only=False).read_upto == 6
    # a replica's fetch is never redirected
    assert read_bound(p, log, 4, -1, FetchIsolation.LOG_END,
                      selection=selection("b")).preferred_read_replica == -1


# -- a follower serving consumers --------------------------------------------------------------
def test_follower_serves_up_to_its_own_high_watermark() -> None:
    f, log = replica(2, hw=4), Log(log_end_offset=8)
    read = read_for_fetch(f, log, 1, 5, HW, 1000, leader_only=False)
    assert read.error is ErrorCode.NONE and log.reads == [(1, 1000, 4)]
    assert read.bound.high_watermark == 4
    # read_committed: its own LSO (no open transaction here: the HW)
    assert read_bound(f, log, 1, 5, FetchIsolation.TXN_COMMITTED,
                      leader_only=False).read_upto == 4


def test_follower_above_its_high_watermark_reads_nothing_and_past_its_end_out_of_range() -> None:
    f, log = replica(2, hw=4), Log(log_end_offset=8)
    behind = read_bound(f, log, 6, 5, HW, leader_only=False)  # the leader may have 6 committed
    assert behind.error is ErrorCode.NONE and not behind.has_data  # waits, as Kafka's read does
    # past its log end: OFFSET_OUT_OF_RANGE, which sends a client back to the leader
    assert read_bound(f, log, 9, 5, HW, leader_only=False).error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert read_bound(f, Log(log_start_offset=3, log_end_offset=8), 2, 5, HW,
                      leader_only=False).error is ErrorCode.OFFSET_OUT_OF_RANGE


def test_follower_refuses_leader_only_fetches_and_stale_epochs() -> None:
    f, log = replica(2), Log()
    # before Fetch v11 (no client metadata) a consumer reads from the leader only
    assert read_bound(f, log, 1, 5, HW).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert read_bound(f, log, 1, 4, HW, leader_only=False).error is ErrorCode.FENCED_LEADER_EPOCH
    assert read_bound(f, log, 1, 6, HW, leader_only=False).error is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert read_bound(f, log, 1, -1, HW, leader_only=False).error is ErrorCode.NONE


def test_replica_without_a_role_answers_not_leader_or_follower() -> None:
    nobody = Partition(PartitionConfig("t", 0, 2))
    bound = read_bound(nobody, Log(), 1, -1, HW, leader_only=False)
    assert bound.error is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_follower_known_only_from_before_its_restart_is_no_candidate() -> None:
    p = replica(1)
    p.broker_epochs = {1: 10, 2: 11, 3: 12}
    caught_up(p, 2, 10, broker_epoch=11)
    assert preferred_read_replica(p, 10, 5, selection("b")) == 2
    p.broker_epochs[2] = 15  # broker 2 re-registered; its last fetch came from before
    assert preferred_read_replica(p, 10, 5, selection("b")) == -1
    caught_up(p, 2, 10, broker_epoch=15)  # it fetched again
    assert preferred_read_replica(p, 10, 5, selection("b")) == 2
