"""broker/produce_order.py (the broker's futures over ``replication/produce_order.py``): a
transactional producer's requests for one partition append in the order they arrived, whichever
one's verification answers first."""

from __future__ import annotations

import asyncio

from floodmark.broker.produce_order import ProduceOrder


def test_requests_append_in_arrival_order_whatever_the_verification_order() -> None:
    async def scenario() -> list[str]:
        order = ProduceOrder()
        appended: list[str] = []
        verified = {name: asyncio.Event() for name in ("a", "b")}
        key = ("t", 0, 7)

        async def request(name: str, needs_verification: bool) -> None:
            if not (needs_verification or order.holds([key])):
                appended.append(name)  # nothing ahead, nothing to ask: straight to the log
                return
            turn, release = order.enter([key])
            try:
                await turn
                if needs_verification:
                    await verified[name].wait()
                appended.append(name)
            finally:
                release()

        a = asyncio.create_task(request("a", True))
        await asyncio.sleep(0)
        b = asyncio.create_task(request("b", True))
        await asyncio.sleep(0)
        verified["b"].set()  # b's coordinator answer comes first
        await asyncio.sleep(0)
        verified["a"].set()
        await asyncio.sleep(0)
        c = asyncio.create_task(request("c", False))  # arrives while b may still wait
        await asyncio.gather(a, b, c)
        assert len(order) == 0  # nothing left queued
        return appended

    assert asyncio.run(scenario()) == ["a", "b", "c"]


def test_other_producers_and_partitions_do_not_wait() -> None:
    async def scenario() -> None:
        order = ProduceOrder()
        turn, release = order.enter([("t", 0, 7)])
        assert turn.done()  # nothing ahead
        assert order.holds([("t", 0, 7)])
        assert not order.holds([("t", 1, 7)])
        assert not order.holds([("t", 0, 8)])
        release()
        assert not order.holds([("t", 0, 7)])

    asyncio.run(scenario())


def test_a_request_cancelled_before_it_ever_ran_lets_the_next_ones_go() -> None:
    """The connection closes and cancels a queued request's task before its first step (its
    ``finally`` never runs): the handler's task callback releases its place all the same
    (``handlers/data._in_turn``), so the producer's next request is not stuck behind it."""
    from floodmark.broker.handlers.data import _in_turn

    async def scenario() -> None:
        order = ProduceOrder()
        key = ("t", 0, 7)
        first_turn, release_first = order.enter([key])
        second_turn, release_second = order.enter([key])
        assert first_turn.done() and not second_turn.done()

        async def never_started() -> list[bytes | memoryview]:
            try:
                await second_turn
                return []
            finally:
                release_second()

        task = _in_turn(never_started(), release_second)
        task.cancel()  # before the loop ran it
        release_first()
        third_turn, release_third = order.enter([key])
        await asyncio.wait_for(third_turn, 5)
        release_third()
        assert len(order) == 0

    asyncio.run(scenario())
