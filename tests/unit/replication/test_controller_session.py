"""``replication/controller_session.py``: when a broker's leadership is in doubt (its controller
session lapsed, or its metadata has not caught up with what the controller did meanwhile)."""

from __future__ import annotations

from floodmark.replication.controller_session import ControllerSession


def test_the_session_is_counted_from_when_the_heartbeat_was_sent() -> None:
    """The controller received the heartbeat after it was sent, so it can fence the broker no
    earlier than the broker counts itself in doubt."""
    s = ControllerSession(session_timeout_ms=2000)
    s.registered(0)
    assert not s.heartbeat_answered(1000, 1400, stale_epoch=False, metadata_end=3)
    assert not s.leadership_in_doubt(3000, 3)
    assert s.leadership_in_doubt(3001, 3)  # 2001 ms after sending, 1601 after the answer
    # An answer that arrives after a lapse (a slow controller) still counts as one.
    assert s.heartbeat_answered(2900, 3100, stale_epoch=False, metadata_end=9)
    assert s.leadership_in_doubt(3100, 3) and not s.leadership_in_doubt(3100, 9)


def test_not_in_doubt_before_registration_nor_within_the_session() -> None:
    s = ControllerSession(session_timeout_ms=2000)
    assert not s.leadership_in_doubt(10_000, 0)  # not registered: no session to lapse
    s.registered(10_000)
    assert not s.heartbeat_answered(10_250, 10_250, stale_epoch=False, metadata_end=7)
    assert not s.leadership_in_doubt(12_250, 0)  # within the session; resync not asked
    assert s.leadership_in_doubt(12_251, 7)  # no answer for longer than the session: lapsed


def test_a_lapse_ends_only_when_the_metadata_reaches_the_controllers_end() -> None:
    s = ControllerSession(session_timeout_ms=2000)
    s.registered(0)
    assert s.leadership_in_doubt(5000, 40)
    # The first answer after the lapse: the controller's metadata ends at 52.
    assert s.heartbeat_answered(5000, 5000, stale_epoch=False, metadata_end=52)
    assert s.leadership_in_doubt(5001, 40)
    assert s.leadership_in_doubt(5001, 51)
    assert not s.leadership_in_doubt(5001, 52)
    assert not s.heartbeat_answered(5250, 5250, stale_epoch=False, metadata_end=60)  # no lapse now
    assert not s.leadership_in_doubt(5250, 52)


def test_the_controllers_session_timeout_is_taken_from_its_answers() -> None:
    s = ControllerSession()
    s.registered(0)
    assert not s.leadership_in_doubt(3000, 0)  # Kafka's default, 9 s
    s.heartbeat_answered(100, 100, stale_epoch=False, metadata_end=0, session_timeout_ms=2000)
    assert s.leadership_in_doubt(2101, 0)


def test_a_stale_broker_epoch_keeps_it_in_doubt_until_registered_and_caught_up() -> None:
    s = ControllerSession(session_timeout_ms=2000)
    s.registered(0)
    assert s.heartbeat_answered(3000, 3000, stale_epoch=True, metadata_end=30)
    assert s.leadership_in_doubt(3000, 30)  # still lapsed: no session
    s.registered(3100)
    assert s.leadership_in_doubt(3100, 29)
    assert not s.leadership_in_doubt(3100, 30)


def test_the_registration_answer_sets_the_session_before_any_heartbeat() -> None:
    """A broker cut off right after registering (no heartbeat answered yet) counts the session
    the controller named in its registration answer, not the default: the controller fences it
    after 2 s, so after 2 s its leadership is in doubt (a merged change made the cluster start
    fast enough for the stale-leader test to cut the broker off before its first heartbeat)."""
    s = ControllerSession()
    s.registered(25_440, session_timeout_ms=2000)
    assert not s.leadership_in_doubt(27_440, 0)
    assert s.leadership_in_doubt(27_441, 0)
