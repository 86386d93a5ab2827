"""A follower's fetches to one leader travel together (replica_fetcher.LeaderLink)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from floodmark.broker.replica_fetcher import LeaderLink, ReplicaManager
from floodmark.client.connection import RequestFailed
from floodmark.controller.image import MetadataImage


class FakeLeader:
    """Answers each Fetch once ``release`` is set: every asked partition, empty."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.fail = False

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      timeout_s: float) -> Any:
        assert api_key == 1
        self.requests.append(body)
        await self.release.wait()
        self.release.clear()
        if self.fail:
            raise RequestFailed("reset")
        return SimpleNamespace(error_code=0, responses=[
            SimpleNamespace(topic_id=t["topic_id"], partitions=[
                SimpleNamespace(partition_index=p["partition"], error_code=0)
                for p in t["partitions"]])
            for t in body["topics"]])

    def close(self) -> None:
        pass


def _link() -> tuple[LeaderLink, FakeLeader]:
    manager = ReplicaManager(2, MetadataImage, lambda: 0)
    link = LeaderLink(manager, "127.0.0.1", 1)
    fake = FakeLeader()
    link.conn = fake  # type: ignore[assignment]
    return link, fake


async def _until(pred: Any) -> None:
    """Turns of the loop until ``pred()`` (bounded: the link needs a handful)."""
    for _ in range(1000):
        if pred():
            return
        await asyncio.sleep(0)
    raise AssertionError("the link made no progress")


def _entry(index: int) -> dict[str, Any]:
    return {"partition": index, "current_leader_epoch": 0, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": 0, "partition_max_bytes": 1}


def test_partitions_asking_together_share_one_fetch() -> None:
    async def main() -> None:
        link, fake = _link()
        a, b = uuid.uuid4(), uuid.uuid4()
        calls = [asyncio.create_task(link.fetch(t, _entry(i), 7))
                 for t in (a, b) for i in range(3)]
        await _until(lambda: fake.requests)
        fake.release.set()
        answers = await asyncio.gather(*calls)
        assert len(fake.requests) == 1
        body = fake.requests[0]
        assert body["replica_state"] == {"replica_id": 2, "replica_epoch": 7}
        assert sorted((t["topic_id"], p["partition"]) for t in body["topics"]
                      for p in t["partitions"]) == sorted((t, i) for t in (a, b)
                                                           for i in range(3))
        assert [p.partition_index for p in answers] == [0, 1, 2, 0, 1, 2]
        link.close()
    asyncio.run(main())


def test_a_partition_asking_during_a_fetch_goes_in_the_next() -> None:
    async def main() -> None:
        link, fake = _link()
        t = uuid.uuid4()
        first = asyncio.create_task(link.fetch(t, _entry(0), 1))
        await _until(lambda: fake.requests)
        late = asyncio.create_task(link.fetch(t, _entry(1), 1))
        fake.release.set()
        await first
        await _until(lambda: len(fake.requests) == 2)
        assert [p["partition"] for p in fake.requests[1]["topics"][0]["partitions"]] == [1]
        fake.release.set()
        assert (await late).partition_index == 1
        link.close()
    asyncio.run(main())


def test_a_failed_fetch_fails_every_partition_in_it_and_a_cancelled_one_is_dropped() -> None:
    async def main() -> None:
        link, fake = _link()
        t = uuid.uuid4()
        calls = [asyncio.create_task(link.fetch(t, _entry(i), 1)) for i in range(2)]
        gone = asyncio.create_task(link.fetch(t, _entry(2), 1))
        await asyncio.sleep(0)
        gone.cancel()  # its fetcher stopped before the Fetch was sent
        await _until(lambda: fake.requests)
        assert len(fake.requests[0]["topics"][0]["partitions"]) == 2
        fake.fail = True
        fake.release.set()
        for call in calls:
            with pytest.raises(RequestFailed):
                await call
        link.close()
    asyncio.run(main())
