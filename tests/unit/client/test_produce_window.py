"""Kafka's idempotent-producer sequence rules (client/produce_window.py), played against a broker
that checks sequences as Kafka's does (the last five batches of a producer de-duplicated)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.client.produce_window import Batch, Outcome, PartitionWindow
from floodmark.errors import ErrorCode

NONE = int(ErrorCode.NONE)
DUP = int(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
OOO = int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)


def window_of(batches: int, max_in_flight: int = 5) -> PartitionWindow:
    w = PartitionWindow(max_in_flight)
    for i in range(batches):
        w.add(i * 10, 10, b"batch %d" % i)
    return w


def send_all(w: PartitionWindow, node: int = 1) -> list[Batch]:
    out = []
    while (b := w.next_to_send()) is not None:
        w.sent(b, node)
        out.append(b)
    return out


def test_five_batches_in_flight_in_order_and_no_sixth_before_the_first_is_acknowledged() -> None:
    w = window_of(8)
    sent = send_all(w)
    assert [b.ordinal for b in sent] == [0, 1, 2, 3, 4]
    assert w.answered(sent[0], NONE) is Outcome.ACKNOWLEDGED
    assert [b.ordinal for b in send_all(w)] == [5]
    assert w.answered(sent[1], DUP) is Outcome.ACKNOWLEDGED  # the broker had it already
    assert [b.ordinal for b in w.unacked] == [2, 3, 4, 5, 6, 7]


def test_a_window_is_counted_from_the_oldest_unacknowledged_batch() -> None:
    """Batch 0 times out (maybe written), 1-4 are acknowledged: nothing past 4 goes until 0 is
    resent and acknowledged, so the broker still holds 0 among its last five if it has it."""
    w = window_of(8)
    sent = send_all(w)
    assert w.answered(sent[0], TIMED_OUT) is Outcome.RETRY
    for b in sent[1:]:
        assert w.answered(b, NONE) is Outcome.ACKNOWLEDGED
    again = send_all(w)
    assert [b.ordinal for b in again] == [0]  # 5 would be six batches past 0
    assert again[0].data == b"batch 0" and again[0].base_sequence == 0
    assert w.answered(again[0], DUP) is Outcome.ACKNOWLEDGED
    assert [b.ordinal for b in send_all(w)] == [5, 6, 7]


def test_after_a_failure_the_rest_of_the_flight_may_be_out_of_order_then_all_go_again() -> None:
    w = window_of(4)
    sent = send_all(w)
    assert w.answered(sent[0], NOT_LEADER) is Outcome.RETRY
    assert w.next_to_send() is None  # nothing new while the failed flight drains
    for b in sent[1:]:
        assert w.answered(b, OOO) is Outcome.RETRY
    again = send_all(w, node=2)  # the new leader
    assert again == sent  # the same batch objects: same bytes, same sequences, same order
    assert w.node == 2


def test_out_of_order_with_no_earlier_failure_is_fatal() -> None:
    w = window_of(3)
    sent = send_all(w)
    assert w.answered(sent[0], NONE) is Outcome.ACKNOWLEDGED
    assert w.answered(sent[1], OOO) is Outcome.FATAL


@pytest.mark.parametrize("code", [int(ErrorCode.INVALID_RECORD), int(ErrorCode.UNKNOWN_PRODUCER_ID),
                                  int(ErrorCode.MESSAGE_TOO_LARGE)])
def test_other_errors_are_fatal(code: int) -> None:
    w = window_of(1)
    (b,) = send_all(w)
    assert w.answered(b, code) is Outcome.FATAL


def test_a_lost_connection_sends_every_unacknowledged_batch_again() -> None:
    w = window_of(3)
    sent = send_all(w)
    assert w.answered(sent[0], NONE) is Outcome.ACKNOWLEDGED
    assert w.lost() == sent[1:]
    assert send_all(w, node=3) == sent[1:]


def test_answers_must_come_in_order_and_batches_stay_on_one_connection() -> None:
    w = window_of(3)
    b0 = w.next_to_send()
    assert b0 is not None
    w.sent(b0, 1)
    b1 = w.next_to_send()
    assert b1 is not None
    with pytest.raises(ValueError):
        w.sent(b1, 2)
    w.sent(b1, 1)
    with pytest.raises(ValueError):
        w.answered(b1, NONE)


def test_one_in_flight_is_one_batch_at_a_time() -> None:
    w = window_of(3, max_in_flight=1)
    sent = send_all(w)
    assert [b.ordinal for b in sent] == [0]
    w.answered(sent[0], NONE)
    assert [b.ordinal for b in send_all(w)] == [1]


def test_the_limit_is_kafkas() -> None:
    with pytest.raises(ValueError):
        PartitionWindow(6)
    with pytest.raises(ValueError):
        PartitionWindow(0)


# -- any order of failures -------------------------------------------------------------------
@dataclass
class Broker:
    """A partition leader's producer-state check, in batches (Kafka's ProducerStateManager):
    a batch among the last five appended is a duplicate, the next one is appended, anything
    else is out of order."""

    log: list[int] = field(default_factory=list)

    def append(self, batch: Batch) -> int:
        if batch.ordinal in self.log[-5:]:
            return DUP
        if batch.ordinal == len(self.log):
            self.log.append(batch.ordinal)
            return NONE
        return OOO


FAULTS = ["ok", "refused", "timed_out", "lost_after_append", "lost_before_append"]


@settings(max_examples=300, deadline=None)
@given(batches=st.integers(1, 14), max_in_flight=st.integers(1, 5),
       faults=st.lists(st.sampled_from(FAULTS), max_size=40),
       sends_per_round=st.lists(st.integers(1, 5), min_size=1, max_size=8))
def test_any_order_of_failures_writes_every_batch_once_in_order(
        batches: int, max_in_flight: int, faults: list[str], sends_per_round: list[int]) -> None:
    """Whatever fails (a refusal, a timeout after the append, a connection lost before or after
    the broker appended), the broker's log ends with every batch once, in order, and no answer
    was fatal."""
    w = window_of(batches, max_in_flight)
    broker = Broker()
    fault_iter = iter(faults)
    rounds = 0
    while w.unacked:
        rounds += 1
        assert rounds < 500, "no progress"
        for _ in range(sends_per_round[rounds % len(sends_per_round)]):
            b = w.next_to_send()
            if b is None:
                break
            assert b.ordinal < w.unacked[0].ordinal + max_in_flight
            w.sent(b, 1)
        if not w.in_flight:
            continue
        b = w.in_flight[0]
        fault = next(fault_iter, "ok")
        if fault == "ok":
            code = broker.append(b)
        elif fault == "refused":
            code = NOT_LEADER
        elif fault == "timed_out":
            broker.append(b)
            code = TIMED_OUT
        else:
            if fault == "lost_after_append":
                broker.append(b)
            w.lost()
            continue
        assert w.answered(b, code) is not Outcome.FATAL
    assert broker.log == list(range(batches))
