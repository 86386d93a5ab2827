"""broker/produce_order.py (the broker's futures over ``replication/txn_produce_gate.py``): a
transactional producer's requests for one partition append in the order they arrived, each
asking the coordinator in its turn, and one given up lets the next ones go."""

from __future__ import annotations

import asyncio

from tests.unit.replication.test_transactions_core import Replica

from floodmark.broker.produce_order import TxnProduces
from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.partition import Partition
from floodmark.replication.produce import produce_as_leader
from floodmark.replication.txn_produce_gate import Append, Ask, Step

TP = ("t", 0)
PID = 7


def _leader() -> Replica:
    r = Replica(1)
    r.apply(r.core.apply_metadata(r.log, PartitionRegistration((1,), (1,), 1, 1, 0), 0))
    return r


def _batch(seq: int, pid: int = PID) -> bytes:
    return simple_batch([f"s{seq}".encode()], producer_id=pid, producer_epoch=0,
                        base_sequence=seq, is_transactional=True)


def _produces(r: Replica) -> TxnProduces:
    def partition(tp: tuple[str, int]) -> Partition | None:
        return r.core if tp == TP else None

    return TxnProduces(partition)


def _append(r: Replica, seq: int, step: Append[int]) -> ErrorCode | None:
    r.next_id += 1
    out = produce_as_leader(r.core, r.log, _batch(seq), acks=1, produce_id=r.next_id,
                            now_ms=0, timeout_ms=1000, verify_transactions=True,
                            verification_guard=step.guards.get(TP))
    r.apply(out.effects)
    return out.answer


def test_requests_append_in_arrival_order_whatever_the_verification_order() -> None:
    async def scenario() -> list[int]:
        r = _leader()
        produces = _produces(r)
        appended: list[int] = []

        async def request(seq: int) -> None:
            token, first = produces.arrive({TP: _batch(seq)}, ())
            try:
                step: Step[int] = await first if isinstance(first, asyncio.Future) else first
                if isinstance(step, Ask):
                    await asyncio.sleep(0.01 if seq == 0 else 0)  # seq 0's answer is slow
                    answered = produces.answered(token, {TP: ErrorCode.NONE})
                    assert answered is not None
                    step = answered
                assert _append(r, seq, step) is ErrorCode.NONE
                appended.append(seq)
            finally:
                produces.give_up(token)

        await asyncio.gather(*(request(seq) for seq in range(3)))
        assert len(produces) == 0  # nothing left in the order
        return appended

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_other_producers_and_partitions_do_not_wait() -> None:
    async def scenario() -> None:
        r = _leader()
        produces = _produces(r)
        token, first = produces.arrive({TP: _batch(0)}, ())
        assert isinstance(first, Ask)
        _other, step = produces.arrive({TP: _batch(0, pid=PID + 1)}, ())
        assert isinstance(step, Ask)  # another producer asks at once
        _unhosted, step = produces.arrive({("t", 1): _batch(0)}, ())
        assert isinstance(step, Append)  # nothing hosted there to guard: straight on
        _behind, turn = produces.arrive({TP: _batch(1)}, ())
        assert isinstance(turn, asyncio.Future) and not turn.done()
        produces.give_up(token)
        assert turn.done() and isinstance(turn.result(), Ask)  # its own question, in turn

    asyncio.run(scenario())


def test_a_request_cancelled_before_it_ever_ran_lets_the_next_ones_go() -> None:
    """The connection closes and cancels a queued request's task before its first step (its
    ``finally`` never runs): the handler's task callback gives its place up all the same
    (``handlers/data._in_turn``), so the producer's next request is not stuck behind it."""
    from floodmark.broker.handlers.data import _in_turn

    async def scenario() -> None:
        r = _leader()
        produces = _produces(r)
        first_token, first = produces.arrive({TP: _batch(0)}, ())
        assert isinstance(first, Ask)
        second_token, second = produces.arrive({TP: _batch(1)}, ())
        assert isinstance(second, asyncio.Future)

        async def never_started() -> list[bytes | memoryview]:
            try:
                await second
                return []
            finally:
                produces.give_up(second_token)

        task = _in_turn(never_started(), lambda: produces.give_up(second_token))
        task.cancel()  # before the loop ran it
        produces.give_up(first_token)
        _third, third = produces.arrive({TP: _batch(0)}, ())
        assert isinstance(third, asyncio.Future)  # behind the second, still in the order
        step = await asyncio.wait_for(third, 5)  # the cancelled task gave its place up
        assert isinstance(step, Ask)
        assert task.cancelled()
        assert len(produces) == 1  # only the third, asking

    asyncio.run(scenario())
