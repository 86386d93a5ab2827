"""The share coordinator's shell (``state_service``) with a fake acks=all port: it answers only
for the state partitions it leads and has loaded, stores a new leader's epoch before it answers
a read, and applies a record only once the append is replicated (a failed one changes
nothing)."""

from __future__ import annotations

import asyncio
import uuid

from floodmark.broker.share_group.partition import RecordState, ShareState, StateBatch
from floodmark.broker.share_group.share_coordinator import ShareCoordinator
from floodmark.broker.share_group.state_records import decode_key, decode_value
from floodmark.broker.share_group.state_service import ShareStateService
from floodmark.errors import ErrorCode

KEY = ("g", uuid.UUID(int=5), 0)
STATE = ShareState(3, 5, (StateBatch(3, 4, RecordState.AVAILABLE, 1),), 0)


class Log:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail: ErrorCode | None = None

    async def append(self, index: int, key: bytes, value: bytes | None
                     ) -> tuple[ErrorCode, int]:
        await asyncio.sleep(0)  # replication takes a turn of the loop
        if self.fail is not None:
            return self.fail, -1
        self.records.append((key, value))
        return ErrorCode.NONE, len(self.records) - 1


def service(led: dict[int, int], log: Log) -> tuple[ShareCoordinator, ShareStateService]:
    core = ShareCoordinator()
    return core, ShareStateService(core, lambda: 1, led.get, log.append)


def test_only_a_loaded_coordinator_answers() -> None:
    log = Log()
    _core, svc = service({}, log)
    assert svc.error_for(KEY) is ErrorCode.NOT_COORDINATOR
    core2, svc2 = service({0: 3}, log)
    assert svc2.error_for(KEY) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    core2.load(0, 3, 1, [])
    assert svc2.error_for(KEY) is ErrorCode.NONE


def test_write_then_a_new_leader_reads_and_fences_the_old_one() -> None:
    async def run() -> None:
        log = Log()
        core, svc = service({0: 1}, log)
        core.load(0, 1, 1, [])
        assert await svc.write(KEY, STATE, 4) == (ErrorCode.NONE, None)
        err, snap, _ = await svc.read(KEY, 5)  # the partition's new leader
        assert err is ErrorCode.NONE and snap is not None and snap.state == STATE
        assert [decode_value(v).leader_epoch for _k, v in log.records if v] == [4, 5]
        assert decode_key(log.records[-1][0]) == KEY
        err, _message = await svc.write(KEY, STATE, 4)  # the old leader, too late
        assert err is ErrorCode.FENCED_LEADER_EPOCH
        log.fail = ErrorCode.NOT_ENOUGH_REPLICAS
        assert (await svc.delete(KEY)) is ErrorCode.NOT_ENOUGH_REPLICAS
        assert core.snapshots[KEY].leader_epoch == 5, "a failed append changes nothing"
        log.fail = None
        assert (await svc.delete(KEY)) is ErrorCode.NONE and KEY not in core.snapshots

    asyncio.run(run())


def test_requests_for_one_share_partition_run_one_at_a_time() -> None:
    async def run() -> None:
        log = Log()
        core, svc = service({0: 1}, log)
        core.load(0, 1, 1, [])
        later = ShareState(5, 5, (), 0)
        # a write in flight and a new leader's read: the read sees the write
        results = await asyncio.gather(svc.write(KEY, later, 1), svc.read(KEY, 2))
        assert results[0] == (ErrorCode.NONE, None)
        assert results[1][1] is not None and results[1][1].state == later

    asyncio.run(run())
