"""``replication/lease.py``: a leader whose controller session lapsed steps down for clients
(issue 26 §4) unless its followers still follow it or nobody else could lead; and the produce
path and the purgatory refuse accordingly, without touching the log or the partition state."""

from __future__ import annotations

from tests.unit.replication.test_produce_path import Leader

from floodmark.errors import ErrorCode
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.lease import steps_down

SESSION_MS = 6000


def test_not_in_doubt_never_steps_down() -> None:
    leader = Leader()
    assert not steps_down(leader.core, 100_000, in_doubt=False, session_timeout_ms=SESSION_MS)


def test_in_doubt_and_no_follower_heard_steps_down() -> None:
    leader = Leader()
    assert steps_down(leader.core, 10, in_doubt=True, session_timeout_ms=SESSION_MS)


def test_a_follower_fetching_within_the_session_keeps_it_leading() -> None:
    """Every controller down: the brokers' sessions all lapse, the followers still fetch, the
    partition keeps serving as Kafka's does."""
    leader = Leader()
    leader.follower_fetch(2, 0, now_ms=1000)
    assert not steps_down(leader.core, 1000 + SESSION_MS // 2, in_doubt=True,
                          session_timeout_ms=SESSION_MS)
    # ... and steps down once no follower has fetched for longer than half the session timeout
    assert steps_down(leader.core, 1001 + SESSION_MS // 2, in_doubt=True,
                      session_timeout_ms=SESSION_MS)


def test_the_only_in_sync_replica_keeps_leading() -> None:
    """No other ISR member: the controller cannot elect anyone cleanly, so stepping down would
    only take the partition's one server away."""
    leader = Leader()
    leader.set_isr((1,), 1)
    assert not steps_down(leader.core, 100_000, in_doubt=True, session_timeout_ms=SESSION_MS)


def test_a_follower_never_steps_down() -> None:
    leader = Leader()
    leader.apply(leader.core.apply_metadata(
        leader.log, PartitionRegistration((1, 2, 3), (1, 2, 3), 2, 6, 1), 50))
    assert not leader.core.is_leader
    assert not steps_down(leader.core, 100_000, in_doubt=True, session_timeout_ms=SESSION_MS)


def test_a_stepped_down_leader_refuses_every_produce_and_appends_nothing() -> None:
    leader = Leader()
    assert leader.produce(0).parked
    end = leader.log.log_end_offset
    out = leader.produce(1, stepped_down=True)
    assert out.answer is ErrorCode.NOT_LEADER_OR_FOLLOWER and out.error_message
    retry = leader.produce(0, stepped_down=True)  # even a retry of a batch it holds
    assert retry.answer is ErrorCode.NOT_LEADER_OR_FOLLOWER and not retry.duplicate
    assert leader.log.log_end_offset == end and leader.core.is_leader


def test_waiting_produce_is_answered_not_leader_and_the_state_is_kept() -> None:
    leader = Leader()
    first = leader.produce(0)
    assert first.parked
    epoch, hw = leader.core.leader_epoch, leader.core.high_watermark
    leader.apply(leader.core.fail_waiting_produces())
    assert leader.answers(first.produce_id) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert leader.core.is_leader and leader.core.leader_epoch == epoch
    assert leader.core.high_watermark == hw and leader.log.log_end_offset == 1
    # the followers still replicate it; the HW moving later answers nothing twice
    leader.follower_fetch(2, 1, now_ms=40)
    leader.follower_fetch(3, 1, now_ms=40)
    assert leader.answers(first.produce_id) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_the_drivers_lease_check_answers_waiting_produce_only_when_it_steps_down() -> None:
    """``ReplicaDriver.check_lease``, what the broker's ``_lease_checks`` and the simulator's
    heartbeat tick both run: a leader still followed keeps its waiting produce; one that
    steps down answers it NOT_LEADER_OR_FOLLOWER at once, the partition state kept."""
    leader = Leader()
    leader.follower_fetch(2, 0, now_ms=1000)
    first = leader.produce(0, now_ms=1000)
    assert first.parked
    followed = 1000 + SESSION_MS // 2
    assert not leader.driver.check_lease(followed, in_doubt=True, session_timeout_ms=SESSION_MS)
    assert leader.answers(first.produce_id) == []
    assert not leader.driver.check_lease(followed + 1, in_doubt=False,
                                         session_timeout_ms=SESSION_MS)
    assert leader.answers(first.produce_id) == []
    assert leader.driver.check_lease(followed + 1, in_doubt=True, session_timeout_ms=SESSION_MS)
    assert leader.answers(first.produce_id) == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert leader.core.is_leader and leader.log.log_end_offset == 1
