"""broker/produce_order.py: a transactional producer's requests for one partition append in the
order they arrived, whichever one's verification answers first."""

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
            ahead = order.ahead([key])
            if not (needs_verification or ahead):
                appended.append(name)  # nothing ahead, nothing to ask: straight to the log
                return
            release = order.enter([key])
            try:
                for earlier in ahead:
                    await earlier
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
        release = order.enter([("t", 0, 7)])
        assert order.ahead([("t", 0, 7)])
        assert order.ahead([("t", 1, 7)]) == []
        assert order.ahead([("t", 0, 8)]) == []
        release()
        assert order.ahead([("t", 0, 7)]) == []

    asyncio.run(scenario())
