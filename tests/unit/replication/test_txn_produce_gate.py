"""``replication.txn_produce_gate``: a transactional Produce's way to the log through KIP-890's
verification, in its producer's order (the broker's handler and the simulator both run it)."""

from __future__ import annotations

from tests.unit.replication.test_transactions_core import Replica

from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import Partition
from floodmark.replication.produce import produce_as_leader
from floodmark.replication.producer_state import VerificationGuard
from floodmark.replication.txn_produce_gate import Append, Ask, TxnProduceGate, order_keys
from floodmark.replication.txn_verification import NOT_ADDED_MESSAGE

PID = 9
TP = ("t", 0)
OTHER = ("t", 1)


def _leader() -> Replica:
    r = Replica(1)
    r.apply(r.core.apply_metadata(r.log, PartitionRegistration((1,), (1,), 1, 1, 0), 0))
    return r


def _batch(seq: int, pid: int = PID) -> bytes:
    return simple_batch([b"v"], producer_id=pid, producer_epoch=0, base_sequence=seq,
                        is_transactional=True)


def _append(r: Replica, seq: int, guard: VerificationGuard | None) -> ErrorCode | None:
    r.next_id += 1
    out = produce_as_leader(r.core, r.log, _batch(seq), acks=1, produce_id=r.next_id,
                            now_ms=0, timeout_ms=1000, verify_transactions=True,
                            verification_guard=guard)
    r.apply(out.effects)
    return out.answer


def _gate(r: Replica) -> TxnProduceGate[str]:
    def partition(tp: tuple[str, int]) -> Partition | None:
        return r.core if tp == TP else None

    return TxnProduceGate(partition)


def test_order_keys_name_the_transactional_partitions_only() -> None:
    plain = simple_batch([b"v"], producer_id=PID, producer_epoch=0, base_sequence=0)
    assert order_keys({TP: _batch(0), OTHER: plain, ("u", 0): None}) == [("t", 0, PID)]


def test_the_first_batch_asks_then_appends_with_its_guard_the_next_goes_straight() -> None:
    r = _leader()
    gate = _gate(r)
    step = gate.arrive("a", {TP: _batch(0)})
    assert isinstance(step, Ask) and set(step.guards) == {TP}
    assert gate.asking("a") and not gate.waiting("a")
    append = gate.answered("a", {TP: ErrorCode.NONE})
    assert append == Append("a", step.guards, {})
    assert not gate.asking("a")  # answered: nothing left to give up
    assert _append(r, 0, append.guards[TP]) is ErrorCode.NONE
    assert gate.done("a") == []
    # The transaction is open here now: no question, and the request never enters the order.
    assert gate.arrive("b", {TP: _batch(1)}) == Append("b", {}, {})
    assert len(gate.order) == 0


def test_a_request_behind_one_still_asking_waits_and_takes_its_guard_in_its_turn() -> None:
    r = _leader()
    gate = _gate(r)
    first = gate.arrive("a", {TP: _batch(0)})
    assert isinstance(first, Ask)
    assert gate.arrive("b", {TP: _batch(1)}) is None  # behind "a": waits
    assert gate.waiting("b") and not gate.asking("b")
    assert gate.answered("b", {TP: ErrorCode.NONE}) is None  # nothing asked for it
    append = gate.answered("a", {TP: ErrorCode.NONE})
    assert append is not None and _append(r, 0, append.guards[TP]) is ErrorCode.NONE
    # "a" opened the transaction: "b"'s turn needs no question.
    assert gate.done("a") == [Append("b", {}, {})]
    assert _append(r, 1, None) is ErrorCode.NONE
    assert gate.done("b") == [] and len(gate.order) == 0


def test_a_refusal_gives_the_guard_back_and_the_next_one_asks_again() -> None:
    r = _leader()
    gate = _gate(r)
    assert isinstance(gate.arrive("a", {TP: _batch(0)}), Ask)
    assert gate.arrive("b", {TP: _batch(1)}) is None
    refused = gate.answered("a", {TP: ErrorCode.INVALID_TXN_STATE})
    assert refused == Append("a", {}, {TP: (ErrorCode.INVALID_TXN_STATE, NOT_ADDED_MESSAGE)})
    steps = gate.done("a")
    assert len(steps) == 1 and isinstance(steps[0], Ask) and steps[0].request == "b"
    assert r.log.log_end_offset == 0


def test_given_up_returns_the_guard_and_lets_the_next_go() -> None:
    r = _leader()
    gate = _gate(r)
    asked = gate.arrive("a", {TP: _batch(0)})
    assert isinstance(asked, Ask)
    assert gate.arrive("b", {TP: _batch(1)}) is None
    steps = gate.give_up("a")
    assert [type(s) for s in steps] == [Ask] and steps[0].request == "b"
    # "a"'s guard is no longer the one the table holds: appending with it is refused.
    assert _append(r, 0, asked.guards[TP]) is ErrorCode.INVALID_TXN_STATE
    assert gate.answered("a", {TP: ErrorCode.NONE}) is None  # its late answer is ignored


def test_a_denied_partition_asks_nothing_and_another_producer_does_not_wait() -> None:
    r = _leader()
    gate = _gate(r)
    assert gate.arrive("a", {TP: _batch(0)}, denied={TP}) == Append("a", {}, {})
    assert r.core.producers.start_verification(PID, 0) is not None  # no guard was kept
    assert isinstance(gate.arrive("b", {TP: _batch(0, pid=PID + 1)}), Ask)


def test_a_partition_not_hosted_is_refused_by_the_coordinators_mapping() -> None:
    r = _leader()
    gate = _gate(r)
    step = gate.arrive("a", {TP: _batch(0), OTHER: _batch(0)})
    assert isinstance(step, Ask) and set(step.guards) == {TP}  # OTHER: no core, no guard
    append = gate.answered("a", {TP: ErrorCode.NONE,
                                 OTHER: ErrorCode.COORDINATOR_NOT_AVAILABLE})
    assert append is not None and set(append.guards) == {TP}
    assert append.refused[OTHER][0] is ErrorCode.NOT_ENOUGH_REPLICAS
