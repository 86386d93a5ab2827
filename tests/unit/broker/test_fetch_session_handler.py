"""The follower's side of a KIP-227 fetch session (``FetchSessionHandler``): what each request
names, and how each answer (or its absence) sets up the next one -- Kafka's FetchSessionHandler
rules."""

from __future__ import annotations

import uuid

from floodmark.broker.fetch_session_handler import FetchSessionHandler, SessionKey
from floodmark.errors import ErrorCode
from floodmark.wire.hot import ReplicaFetchPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def data(partition: int, fetch_offset: int, epoch: int = 5) -> ReplicaFetchPartition:
    return (partition, epoch, fetch_offset, epoch, 0, 1_048_576)


def wanted(*entries: tuple[uuid.UUID, int, int]) -> dict[SessionKey, ReplicaFetchPartition]:
    return {(t, p): data(p, offset) for t, p, offset in entries}


def established(session_id: int = 77) -> FetchSessionHandler:
    """A handler whose full fetch of T1-0, T1-1, T2-0 was answered with a new session."""
    h = FetchSessionHandler()
    request = h.build(wanted((T1, 0, 10), (T1, 1, 20), (T2, 0, 30)))
    assert h.handle_response(ErrorCode.NONE, session_id,
                             [(T1, 0), (T1, 1), (T2, 0)]) is True
    assert request.full
    return h


def test_the_first_fetch_is_full_and_asks_for_a_session() -> None:
    h = FetchSessionHandler()
    request = h.build(wanted((T1, 0, 10), (T2, 0, 30), (T1, 1, 20)))
    assert (request.session_id, request.session_epoch, request.full) == (0, 0, True)
    # grouped by topic, in first-seen order
    assert request.to_send == [(T1, [data(0, 10), data(1, 20)]), (T2, [data(0, 30)])]
    assert request.forgotten == []
    assert h.handle_response(ErrorCode.NONE, 77, [(T1, 0), (T1, 1), (T2, 0)])
    assert (h.session_id, h.epoch) == (77, 1)


def test_incremental_names_only_added_and_changed_and_forgets_the_rest() -> None:
    h = established()
    # T1-0 moved on, T1-1 unchanged, T2-0 no longer fetched here, T2-1 new
    request = h.build(wanted((T1, 0, 15), (T1, 1, 20), (T2, 1, 40)))
    assert (request.session_id, request.session_epoch, request.full) == (77, 1, False)
    assert request.to_send == [(T1, [data(0, 15)]), (T2, [data(1, 40)])]
    assert request.forgotten == [(T2, [0])]
    # The answer names only what had news; the others are the session's, unchanged.
    assert h.handle_response(ErrorCode.NONE, 77, [(T1, 0)])
    assert h.epoch == 2
    # nothing changed: an empty incremental request (every partition is the session's)
    request = h.build(wanted((T1, 0, 15), (T1, 1, 20), (T2, 1, 40)))
    assert (request.session_epoch, request.to_send, request.forgotten) == (2, [], [])
    assert h.handle_response(ErrorCode.NONE, 77, [])
    assert h.epoch == 3


def test_a_changed_leader_epoch_or_log_start_is_a_change() -> None:
    h = established()
    moved = wanted((T1, 0, 10), (T1, 1, 20), (T2, 0, 30))
    moved[(T1, 1)] = (1, 6, 20, 6, 0, 1_048_576)  # new leader epoch
    moved[(T2, 0)] = (0, 5, 30, 5, 12, 1_048_576)  # the follower's log start moved
    request = h.build(moved)
    assert request.to_send == [(T1, [moved[(T1, 1)]]), (T2, [moved[(T2, 0)]])]


def test_session_not_found_starts_a_new_session() -> None:
    h = established()
    h.build(wanted((T1, 0, 10)))
    assert h.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, []) is False
    request = h.build(wanted((T1, 0, 10), (T1, 1, 20)))
    assert (request.session_id, request.session_epoch, request.full) == (0, 0, True)
    assert request.to_send == [(T1, [data(0, 10), data(1, 20)])]


def test_a_wrong_epoch_or_a_lost_answer_closes_the_session_and_starts_over() -> None:
    for fail in ("epoch", "connection"):
        h = established()
        h.build(wanted((T1, 0, 11), (T1, 1, 20), (T2, 0, 30)))
        if fail == "epoch":
            assert not h.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 77, [])
        else:
            h.handle_error()
        # the old id with epoch 0: the leader drops it and opens a new one; every partition
        request = h.build(wanted((T1, 0, 11), (T1, 1, 20), (T2, 0, 30)))
        assert (request.session_id, request.session_epoch, request.full) == (77, 0, True)
        assert request.to_send == [(T1, [data(0, 11), data(1, 20)]), (T2, [data(0, 30)])]
        assert h.handle_response(ErrorCode.NONE, 91, [(T1, 0), (T1, 1), (T2, 0)])
        assert (h.session_id, h.epoch) == (91, 1)


def test_no_session_from_the_leader_means_full_fetches() -> None:
    h = FetchSessionHandler()
    h.build(wanted((T1, 0, 10)))
    assert h.handle_response(ErrorCode.NONE, 0, [(T1, 0)])  # its cache had no slot
    request = h.build(wanted((T1, 0, 10)))
    assert (request.session_id, request.session_epoch, request.full) == (0, 0, True)


def test_an_answer_that_does_not_fit_the_session_is_refused() -> None:
    # an incremental answer naming a partition outside the session
    h = established()
    h.build(wanted((T1, 0, 10), (T1, 1, 20)))  # T2-0 forgotten
    assert not h.handle_response(ErrorCode.NONE, 77, [(T2, 0)])
    assert (h.session_id, h.epoch) == (77, 0)  # closed: full next
    # a full answer leaving out a requested partition
    h = FetchSessionHandler()
    h.build(wanted((T1, 0, 10), (T1, 1, 20)))
    assert not h.handle_response(ErrorCode.NONE, 5, [(T1, 0)])
    assert (h.session_id, h.epoch) == (0, 0)


def test_epochs_wrap_past_int32_max_to_one() -> None:
    h = established()
    h.epoch = 2**31 - 1
    request = h.build(wanted((T1, 0, 10), (T1, 1, 20), (T2, 0, 30)))
    assert request.session_epoch == 2**31 - 1
    assert h.handle_response(ErrorCode.NONE, 77, [])
    assert h.epoch == 1
