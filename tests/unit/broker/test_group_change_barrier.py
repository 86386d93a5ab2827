"""A request that reads what kind of group it names waits while a change of that group is being
stored (``group_apis.settled``). Found by the mixed-protocol chaos runs: a coordinator resumed
after a pause applied a downgrade in memory, answered a member's ConsumerGroupHeartbeat
GROUP_ID_NOT_FOUND from it, and then undid it when its store failed NOT_COORDINATOR. Kafka
answers only once the records written before are committed. One in-process broker; the
change in flight is held by the group's own lock, as ``change_consumer_group`` holds it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.broker.handlers.group_apis import _CONSUMER_GROUP_LOCKS
from floodmark.broker.offsets import GroupRecord, MemberRecord
from floodmark.client.connection import decode_response, encode_request
from floodmark.wire.api_table import ApiKey

GROUP = "g"


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:9999",
                               overrides=["offsets.topic.num.partitions=1"])
    b = Broker(config)
    b.open()
    asyncio.run(b.create_topic("t", 1, 1, {}))
    yield b
    b.close()


async def _heartbeat(broker: Broker, member_id: str, epoch: int) -> Any:
    body = {"group_id": GROUP, "member_id": member_id, "member_epoch": epoch,
            "rebalance_timeout": 30000, "subscribed_topic_names": ["t"],
            "topic_partitions": []}
    frame = encode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, 7, body)[4:]
    conn = SimpleNamespace(peer="127.0.0.1:40000", sasl=None)
    out = broker.dispatch(memoryview(frame), conn)  # type: ignore[arg-type]
    if not isinstance(out, list):
        out = await out  # type: ignore[misc]
    return decode_response(b"".join(bytes(p) for p in out)[4:],
                           ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, 7)


def test_a_heartbeat_waits_for_the_change_in_flight_and_answers_from_what_was_kept(
        broker: Broker) -> None:
    async def run() -> None:
        joined = await _heartbeat(broker, "m1", 0)
        assert joined.error_code == 0 and joined.member_epoch > 0
        member, epoch = str(joined.member_id), int(joined.member_epoch)
        core = broker.consumer_groups
        lock = _CONSUMER_GROUP_LOCKS.setdefault(core, {}).setdefault(GROUP, asyncio.Lock())
        await lock.acquire()
        # a downgrade applied in memory and not stored yet: the consumer group gone, the
        # classic core holding the group with its (classic) members
        kept = core.groups.pop(GROUP)
        broker.groups.load(GROUP, GroupRecord(
            "consumer", epoch, "range", "c1", 0,
            (MemberRecord("c1", None, "c", "/127.0.0.1", 30000, 45000, b"", b""),)))
        beat = asyncio.ensure_future(_heartbeat(broker, member, epoch))
        for _ in range(20):  # the heartbeat runs as far as it can: it must be waiting
            await asyncio.sleep(0)
        assert not beat.done(), "answered while the group's change was in flight"
        broker.groups.unload([GROUP])  # the store failed: the change is undone
        core.groups[GROUP] = kept
        lock.release()
        answer = await asyncio.wait_for(beat, 30)
        assert (answer.error_code, answer.member_id) == (0, member)

    asyncio.run(run())


def test_with_no_change_in_flight_a_heartbeat_is_answered_at_once(broker: Broker) -> None:
    async def run() -> None:
        joined = await _heartbeat(broker, "m1", 0)
        again = await _heartbeat(broker, str(joined.member_id), int(joined.member_epoch))
        assert again.error_code == 0

    asyncio.run(run())


def test_the_classic_protocol_requests_wait_too(broker: Broker) -> None:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup are routed by the group's kind as well
    (``classic_protocol``): a Heartbeat waits for the change in flight like the KIP-848 one."""
    async def run() -> None:
        core = broker.consumer_groups
        lock = _CONSUMER_GROUP_LOCKS.setdefault(core, {}).setdefault(GROUP, asyncio.Lock())
        await lock.acquire()
        frame = encode_request(ApiKey.HEARTBEAT, 4, 7, {
            "group_id": GROUP, "generation_id": 1, "member_id": "c1",
            "group_instance_id": None})[4:]

        async def beat() -> Any:
            out = broker.dispatch(memoryview(frame), None)  # type: ignore[arg-type]
            return out if isinstance(out, list) else await out  # type: ignore[misc]

        pending = asyncio.ensure_future(beat())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not pending.done(), "answered while the group's change was in flight"
        lock.release()
        out = await asyncio.wait_for(pending, 30)
        answer = decode_response(b"".join(bytes(p) for p in out)[4:], ApiKey.HEARTBEAT, 4, 7)
        assert answer.error_code != 0  # no such member: answered, after the change

    asyncio.run(run())
