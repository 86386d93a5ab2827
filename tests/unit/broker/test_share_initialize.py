"""InitializeShareGroupState (API 83) at the share coordinator, and a share-partition leader
loading a state the group coordinator initialized without a start offset: a new state is stored
at the given state epoch with start offset -1, the leader places the start offset by
``share.auto.offset.reset`` at that state epoch, and an initialization never wipes a state that
exists (a lower state epoch is fenced)."""

from __future__ import annotations

import asyncio

from tests.unit.broker.test_share_epoch_race import KEY, HeldLog, loaded, offsets, share_groups

from floodmark.broker.share_group.partition import OffsetReset
from floodmark.errors import ErrorCode


def test_initialize_then_the_leader_places_the_start_offset() -> None:
    async def run() -> None:
        groups = share_groups(HeldLog(), OffsetReset.LATEST)
        service = groups.persister.service
        assert await groups.persister.initialize(KEY, 3, -1) is ErrorCode.NONE
        snap = service.core.snapshots[KEY]
        assert (snap.state.start_offset, snap.state.state_epoch, snap.leader_epoch) == (-1, 3, -1)
        assert service.summary(KEY)[1] is not None
        core = await loaded(groups, 5)  # latest: the high watermark, 10
        assert (core.start_offset, core.state_epoch) == (10, 3)
        stored = service.core.snapshots[KEY]
        assert (stored.state.start_offset, stored.state.state_epoch, stored.leader_epoch) \
            == (10, 3, 5)
        # a retried initialization changes nothing; a lower state epoch is fenced
        assert await groups.persister.initialize(KEY, 3, -1) is ErrorCode.NONE
        assert await groups.persister.initialize(KEY, 4, -1) is ErrorCode.NONE
        assert service.core.snapshots[KEY].state.start_offset == 10
        err, _message = await service.initialize(KEY, 2, -1)
        assert err is ErrorCode.FENCED_STATE_EPOCH
        # a higher state epoch with a start offset starts over there (the leader's next
        # write, at the old state epoch, is fenced)
        err, _message = await service.initialize(KEY, 4, 2)
        assert err is ErrorCode.NONE and service.core.snapshots[KEY].state.start_offset == 2
        assert offsets(core, "m", 0) == set()  # nothing past the high watermark yet
        core.skip([10])
        assert (await groups.save([(KEY, core)]))[KEY] is ErrorCode.FENCED_STATE_EPOCH

    asyncio.run(run())
