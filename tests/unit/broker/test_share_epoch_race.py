"""A share partition's leader epoch moves on while this broker keeps leading it (a broker that
lost its controller session while it was the partition's only in-sync replica is re-elected at a
new epoch; a re-registration bumps it too) and a request's state write at the old epoch is still
in flight. Driven through the real share coordinator (``state_service`` over a replicated-log
port whose appends the test holds and releases) and the local persister; only the log is fake.

What the code before the fix did (both tests failed on it):
* the old epoch's write landed first and the new epoch's read got it: the new share partition
  had the records the old one had just handed out (and answered) as AVAILABLE, so a second
  member got them while the first still held their locks;
* a request acknowledged on the old share partition and its ``save`` ran after the reload: it
  wrote the *new* share partition's state (looked up by key), was answered as stored, and the
  ACCEPT was lost: the records were delivered again as new.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from floodmark.broker.share_group.driver import ShareGroups, ShareSettings
from floodmark.broker.share_group.partition import (
    Acknowledgement,
    AcknowledgeType,
    OffsetReset,
    SharePartition,
    ShareState,
)
from floodmark.broker.share_group.persister import SharePersister
from floodmark.broker.share_group.share_coordinator import ShareCoordinator
from floodmark.broker.share_group.state_service import ShareStateService
from floodmark.errors import ErrorCode
from floodmark.metadata import CoordinatorType
from floodmark.security.client_security import ClientSecurity

KEY = ("g", uuid.UUID(int=7), 0)


class HeldLog:
    """The ``__share_group_state`` partition: appends wait until the test lets them through
    (``hold``/``release``), in the order they came."""

    def __init__(self) -> None:
        self.count = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    async def append(self, index: int, key: bytes, value: bytes | None
                     ) -> tuple[ErrorCode, int]:
        self.waiting += 1
        await self.gate.wait()
        self.waiting -= 1
        self.count += 1
        return ErrorCode.NONE, self.count - 1


class Routes:
    def coordinator_for(self, key: str, key_type: CoordinatorType) -> int:
        return 1  # this broker

    def broker_address(self, node_id: int, listener_name: str | None = None
                       ) -> tuple[str, int] | None:
        return None


def share_groups(log: HeldLog, reset: OffsetReset = OffsetReset.EARLIEST) -> ShareGroups:
    core = ShareCoordinator()
    core.load(0, 0, 1, [])
    service = ShareStateService(core, lambda: 1, lambda _i: 0, log.append)
    persister = SharePersister(1, Routes(), service, ClientSecurity)

    async def store(_group: str, _pairs: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        return ErrorCode.NONE

    return ShareGroups(ShareSettings(enabled=True, reset=reset), persister, store)


async def until(cond: Callable[[], bool]) -> None:
    """Turn the loop until ``cond()`` holds (bounded: the test fails when nothing moves)."""
    for _ in range(1_000):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("no progress")


async def loaded(groups: ShareGroups, epoch: int) -> SharePartition:
    err, core = await groups.load(KEY, epoch, 0, 10)
    assert err is ErrorCode.NONE and core is not None, err
    return core


def offsets(core: SharePartition, member: str, now_ms: int) -> set[int]:
    got = core.acquire(member, 10, 100, now_ms)
    return {o for a in got.acquired for o in range(a.first_offset, a.last_offset + 1)}


def test_records_in_flight_at_the_old_epoch_are_not_handed_to_a_second_member() -> None:
    async def run() -> None:
        log = HeldLog()
        groups = share_groups(log)
        core1 = await loaded(groups, 5)
        first = offsets(core1, "m1", 0)
        assert first == set(range(10))
        log.hold()
        save = asyncio.ensure_future(groups.save([(KEY, core1)]))
        await until(lambda: log.waiting == 1)
        # the leader epoch moves on, this broker still leads; a fetch of another member
        reload = asyncio.ensure_future(loaded(groups, 6))
        await until(lambda: log.waiting == 1 and len(groups._loading) == 1)
        log.release()
        assert (await save)[KEY] is ErrorCode.NONE  # m1's records were handed out
        core2 = await reload
        second = offsets(core2, "m2", 1)
        assert not first & second, f"delivered to two members at once: {first & second}"
        # m1 still holds them, at the new epoch too: its ACCEPT is taken and stored
        res = core2.acknowledge("m1", [Acknowledgement(0, 9, (AcknowledgeType.ACCEPT,))])
        assert res.error is ErrorCode.NONE
        assert core2.start_offset == 10

    asyncio.run(run())


def test_an_accept_made_at_the_old_epoch_is_stored_or_refused() -> None:
    async def run() -> None:
        log = HeldLog()
        groups = share_groups(log)
        core1 = await loaded(groups, 5)
        assert offsets(core1, "m1", 0) == set(range(10))
        assert (await groups.save([(KEY, core1)]))[KEY] is ErrorCode.NONE
        # a ShareAcknowledge took the share partition at epoch 5 and acknowledged...
        res = core1.acknowledge("m1", [Acknowledgement(0, 9, (AcknowledgeType.ACCEPT,))])
        assert res.error is ErrorCode.NONE
        # ...the epoch moved on and a fetch reloaded the share partition before it saved
        core2 = await loaded(groups, 6)
        err = (await groups.save([(KEY, core1)]))[KEY]
        again = offsets(core2, "m2", 1)
        if err is ErrorCode.NONE:  # answered as stored: never delivered again
            assert not again, f"accepted records delivered again: {sorted(again)}"
        # else the acknowledgement failed and the client knows: redelivery is allowed

    asyncio.run(run())


def test_a_write_fenced_by_the_new_epoch_is_made_again_there() -> None:
    async def run() -> None:
        log = HeldLog()
        groups = share_groups(log)
        core1 = await loaded(groups, 5)
        assert offsets(core1, "m1", 0) == set(range(10))
        log.hold()
        reload = asyncio.ensure_future(loaded(groups, 6))  # its read is stored first
        await until(lambda: log.waiting == 1)
        save = asyncio.ensure_future(groups.save([(KEY, core1)]))  # fenced at epoch 5
        await asyncio.sleep(0)
        log.release()
        assert await reload is core1, "the same leader keeps its share partition"
        assert (await save)[KEY] is ErrorCode.NONE, "written again at epoch 6"
        assert not offsets(core1, "m2", 1), "m1 still holds its records"
        stored = groups.persister.service.core.snapshots[KEY]
        assert stored.leader_epoch == 6 and stored.state == core1.snapshot()
        assert stored.state.end_offset == 10

    asyncio.run(run())


def test_a_state_another_leader_changed_is_loaded_not_kept() -> None:
    async def run() -> None:
        log = HeldLog()
        groups = share_groups(log)
        core1 = await loaded(groups, 5)
        assert offsets(core1, "m1", 0) == set(range(10))
        assert (await groups.save([(KEY, core1)]))[KEY] is ErrorCode.NONE
        # another broker led at epoch 6 and its member accepted 0..9
        other = SharePartition(core1.config)
        other.restore(groups.persister.service.core.snapshots[KEY].state)
        assert offsets(other, "m9", 0) == set(range(10))
        other.acknowledge("m9", [Acknowledgement(0, 9, (AcknowledgeType.ACCEPT,))])
        err, _message = await groups.persister.service.write(KEY, other.snapshot(), 6)
        assert err is ErrorCode.NONE
        core3 = await loaded(groups, 7)  # this broker leads again
        assert core3 is not core1 and core3.start_offset == 10
        assert (await groups.save([(KEY, core1)]))[KEY] is not ErrorCode.NONE, \
            "a change of the replaced share partition is not answered as stored"

    asyncio.run(run())


def test_one_request_that_changed_a_replaced_share_partition_and_its_successor() -> None:
    async def run() -> None:
        groups = share_groups(HeldLog())
        core1 = await loaded(groups, 5)
        assert offsets(core1, "m1", 0) == set(range(10))
        assert (await groups.save([(KEY, core1)]))[KEY] is ErrorCode.NONE
        res = core1.acknowledge("m1", [Acknowledgement(0, 4, (AcknowledgeType.ACCEPT,))])
        assert res.error is ErrorCode.NONE
        # another leader changed the state meanwhile (it accepted everything), so this one
        # loads it anew
        err, _m = await groups.persister.service.write(KEY, ShareState(10, 10), 6)
        assert err is ErrorCode.NONE
        core2 = await loaded(groups, 7)
        assert core2 is not core1
        core2.skip([10])  # a change of the successor in the same request
        errors = await groups.save([(KEY, core1), (KEY, core2)])
        assert errors[KEY] is not ErrorCode.NONE, "the ACCEPT on core1 was not stored"
        stored = groups.persister.service.core.snapshots[KEY].state
        assert stored == core2.snapshot(), "the successor's change is stored"

    asyncio.run(run())
