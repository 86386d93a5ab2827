"""The leader's side of a replica's Fetch of many partitions (``ReplicaManager.answer_fetch``):
parked while none of its partitions has records, woken by an append to any of them, and answered
with the records of every partition appended to before it runs again -- the hop every acks=all
write waits on (docs/scale.md, "A regression at few partitions"). Real partitions, logs, purgatory
and wire codecs; only the clock is held still, so an answer can only come from a wake, never
from the wait running out (which would answer without re-reading the partitions)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.broker.fetch_session_handler import FetchSessionHandler
from floodmark.broker.fetch_sessions import FetchSessionCache
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.broker.replica_fetcher import ReplicaManager
from floodmark.broker.topic_metrics import BrokerTopicMetrics
from floodmark.client.connection import decode_response
from floodmark.controller.image import MetadataImage, TopicImage
from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.storage.log import Log
from floodmark.wire.codec import decode_request
from floodmark.wire.hot import encode_replica_fetch_request

TOPIC = "t"
TOPIC_ID = uuid.uuid4()
LEADER, FOLLOWER, EPOCH = 1, 2, 3
PARTITIONS = 3
NOW_MS = 1_000


class Hooks:
    """The broker's side of the partitions' ports: wakes go to the one purgatory, as in
    ``Broker.wake_fetches`` / ``wake_replica_fetches``."""

    def __init__(self, purgatory: FetchPurgatory) -> None:
        self.purgatory = purgatory

    def wake_fetches(self, key: tuple[str, int]) -> None:
        self.purgatory.wake(key)

    def wake_replica_fetches(self, key: tuple[str, int]) -> None:
        self.purgatory.wake(key)

    def complete_produce(self, produce_id: int, error: ErrorCode, base_offset: int) -> None:
        pass

    def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None:
        pass

    def flush_log(self, key: tuple[str, int]) -> None:
        pass

    def checkpoint_due(self) -> None:
        pass


@dataclass
class Host:
    """``LeaderHost``: the leader's partitions and its purgatory."""

    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    purgatory: FetchPurgatory = field(default_factory=FetchPurgatory)
    topic_metrics: BrokerTopicMetrics | None = None
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)


def leader(tmp_path: Path) -> tuple[Host, ReplicaManager]:
    host = Host()
    hooks = Hooks(host.purgatory)
    for p in range(PARTITIONS):
        ps = PartitionState(TOPIC, p, node_id=LEADER, log=Log.open(str(tmp_path / f"t-{p}"),
                                                                  now_ms=0), hooks=hooks)
        ps.apply_metadata(PartitionRegistration((LEADER, FOLLOWER), (LEADER, FOLLOWER), LEADER,
                                                EPOCH, 0), 0)
        host.partitions[(TOPIC, p)] = ps
    image = MetadataImage()
    image.topics[TOPIC] = TopicImage(TOPIC, TOPIC_ID, {})
    return host, ReplicaManager(LEADER, lambda: image, lambda: NOW_MS)


def append(host: Host, partition: int, value: bytes) -> None:
    """A write on the leader, as the produce path makes it: append, then the core's effects
    (``WakeFollowerFetches`` among them)."""
    ps = host.partitions[(TOPIC, partition)]
    info = ps.log.append_as_leader(simple_batch([value]), ps.leader_epoch, NOW_MS)
    ps.apply(ps.core.on_leader_append(ps.log, 1, -1, info.first_offset, info.last_offset,
                                      NOW_MS, 30_000))


def replica_fetch(host: Host, correlation_id: int) -> tuple[Any, Any]:
    """The follower's Fetch v15 of every partition from its log end, as its fetcher packs it."""
    parts = []
    for p in range(PARTITIONS):
        log = host.partitions[(TOPIC, p)].log
        last_epoch = EPOCH if log.log_end_offset > 0 else -1
        parts.append((p, EPOCH, log.log_end_offset, last_epoch, 0, 1_048_576))
    frame = encode_replica_fetch_request(correlation_id, "replica-2", FOLLOWER, -1, 500, 1,
                                         10_485_760, [(TOPIC_ID, parts)])
    return decode_request(frame[4:])


def records_by_partition(encoded: Any, correlation_id: int) -> dict[int, int]:
    """The answer's record bytes per partition, decoded as the follower decodes it."""
    frame = b"".join(bytes(x) for x in encoded)[4:]
    resp = decode_response(frame, 1, 15, correlation_id)
    assert int(resp.error_code) == 0
    out = {}
    for t in resp.responses:
        for part in t.partitions:
            assert int(part.error_code) == 0
            out[int(part.partition_index)] = len(part.records or b"")
    return out


async def parked(host: Host, manager: ReplicaManager, correlation_id: int
                 ) -> asyncio.Task[Any]:
    header, req = replica_fetch(host, correlation_id)
    task = asyncio.ensure_future(manager.answer_fetch(host, header, req))
    for _ in range(100):  # bounded: the Fetch reaches the purgatory within a few loop steps
        if len(host.purgatory) == PARTITIONS:
            return task
        await asyncio.sleep(0)
    raise AssertionError("the replica Fetch did not park on its partitions")


def test_an_append_to_any_partition_wakes_the_parked_fetch_and_is_in_its_answer(
        tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[int, int], int]:
        host, manager = leader(tmp_path)
        task = await parked(host, manager, 7)
        assert not task.done()  # nothing to send: it waits
        append(host, 1, b"one")
        answer = records_by_partition(await asyncio.wait_for(task, 10), 7)
        # The follower's next Fetch reports the record: the HW moves (the acks=all write's
        # completion), and with nothing new that Fetch parks again.
        task = await parked(host, manager, 8)
        hw = host.partitions[(TOPIC, 1)].high_watermark
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return answer, hw

    answer, hw = asyncio.run(scenario())
    assert answer[1] > 0 and answer[0] == answer[2] == 0
    assert hw == 1


def test_appends_before_the_woken_fetch_runs_again_are_all_in_its_answer(
        tmp_path: Path) -> None:
    """A Fetch already woken (a HW move on partition 0) but not yet run again when partitions
    1 and 2 are appended to: it re-reads every partition woken meanwhile, so both writes go in
    this answer rather than waiting for the follower's next round."""

    async def scenario() -> dict[int, int]:
        host, manager = leader(tmp_path)
        task = await parked(host, manager, 9)
        host.purgatory.wake((TOPIC, 0))  # as a HW move wakes it: nothing to read there
        append(host, 1, b"one")  # no await in between: the Fetch has not run yet
        append(host, 2, b"two")
        return records_by_partition(await asyncio.wait_for(task, 10), 9)

    answer = asyncio.run(scenario())
    assert answer[1] > 0 and answer[2] > 0 and answer[0] == 0


# -- KIP-227: the follower's fetch session with its leader --------------------------------------


class SessionFollower:
    """The follower's side of the wire: its ``FetchSessionHandler``, requests packed as its
    fetcher packs them, answers decoded as it decodes them; ``offsets``: each partition's fetch
    offset (its log end), moved by the records an answer brings."""

    def __init__(self) -> None:
        self.handler = FetchSessionHandler()
        self.offsets = dict.fromkeys(range(PARTITIONS), 0)
        self.correlation_id = 100
        self.full = True

    def request(self) -> tuple[Any, Any]:
        wanted = {(TOPIC_ID, p): (p, EPOCH, offset, EPOCH if offset else -1, 0, 1_048_576)
                  for p, offset in self.offsets.items()}
        session = self.handler.build(wanted)
        self.full = session.full
        self.correlation_id += 1
        frame = encode_replica_fetch_request(
            self.correlation_id, "replica-2", FOLLOWER, -1, 500, 1, 10_485_760,
            session.to_send, session_id=session.session_id,
            session_epoch=session.session_epoch, forgotten=session.forgotten)
        header, req = decode_request(frame[4:])
        return header, req

    def answer(self, encoded: Any) -> dict[int, tuple[int, int]]:
        """(record bytes, high watermark) of each partition the answer names."""
        frame = b"".join(bytes(x) for x in encoded)[4:]
        resp = decode_response(frame, 1, 15, self.correlation_id)
        named = {(t.topic_id, int(p.partition_index)): p
                 for t in resp.responses for p in t.partitions}
        assert self.handler.handle_response(ErrorCode(int(resp.error_code)),
                                            int(resp.session_id), named)
        out = {}
        for (_, index), part in named.items():
            assert int(part.error_code) == 0
            if part.records:
                self.offsets[index] += 1  # one record per write in these tests
            out[index] = (len(part.records or b""), int(part.high_watermark))
        return out


async def session_fetch(host: Host, manager: ReplicaManager, follower: SessionFollower,
                        parks: bool) -> asyncio.Task[Any]:
    header, req = follower.request()
    task = asyncio.ensure_future(manager.answer_fetch(host, header, req))
    for _ in range(100):  # bounded: a few loop steps to answer or to park
        if task.done() or len(host.purgatory) == PARTITIONS:
            break
        await asyncio.sleep(0)
    assert task.done() is not parks
    return task


def test_an_incremental_session_names_only_partitions_with_news(tmp_path: Path) -> None:
    """The first Fetch is full and opens a session; then the follower names nothing, the
    leader parks the Fetch on every partition of the session, an append to one that the
    request did not name wakes it, and the answer carries that partition only."""

    async def scenario() -> None:
        host, manager = leader(tmp_path)
        follower = SessionFollower()
        append(host, 0, b"zero")  # so the full answer has records and returns at once
        full = follower.answer(await (await session_fetch(host, manager, follower, False)))
        assert follower.full and follower.handler.session_id > 0
        assert set(full) == {0, 1, 2} and full[0][0] > 0
        assert len(host.fetch_sessions) == 1
        # Partition 0's offset moved (named): the leader counts the fetch and its HW moves,
        # but each answer carries the HW from before the fetch was counted (as without a
        # session), so the follower learns HW 1 from its next answer.
        task = await session_fetch(host, manager, follower, True)
        assert host.partitions[(TOPIC, 0)].high_watermark == 1
        append(host, 2, b"two")
        incremental = follower.answer(await asyncio.wait_for(task, 10))
        assert not follower.full
        assert incremental == {2: (incremental[2][0], 0)} and incremental[2][0] > 0
        # The next Fetch names only partition 2 (its offset moved) and parks on all three; an
        # append to 1 wakes it: 1 with its record, 0 with its new HW, 2 left out (its HW
        # moves with this Fetch, after the answer's snapshot).
        task = await session_fetch(host, manager, follower, True)
        assert host.partitions[(TOPIC, 2)].high_watermark == 1
        append(host, 1, b"one")
        incremental = follower.answer(await asyncio.wait_for(task, 10))
        assert set(incremental) == {0, 1}
        assert incremental[0] == (0, 1) and incremental[1][0] > 0
        # 2's HW news goes with the next answer: an append to 0 wakes it
        task = await session_fetch(host, manager, follower, True)
        append(host, 0, b"zero again")
        incremental = follower.answer(await asyncio.wait_for(task, 10))
        assert set(incremental) == {0, 2} and incremental[2] == (0, 1)

    asyncio.run(scenario())


def test_partitions_left_out_of_an_incremental_fetch_still_count_as_fetched(
        tmp_path: Path) -> None:
    """The leader records the follower's fetch of every partition of the session on each
    Fetch, named or not, with the fetch offset the session remembers (Kafka updates the
    follower fetch state of the session's cached partitions): a follower that keeps fetching
    stays caught up (``last_caught_up_time_ms``) on partitions it never names again, and is
    not shrunk out of the ISR after ``replica.lag.time.max.ms``."""
    clock = [NOW_MS]

    async def scenario() -> None:
        host, _ = leader(tmp_path)
        image = MetadataImage()
        image.topics[TOPIC] = TopicImage(TOPIC, TOPIC_ID, {})
        manager = ReplicaManager(LEADER, lambda: image, lambda: clock[0])
        follower = SessionFollower()
        append(host, 0, b"zero")
        follower.answer(await (await session_fetch(host, manager, follower, False)))
        lag_ms = host.partitions[(TOPIC, 1)].core.config.replica_lag_time_max_ms
        for _ in range(3):
            clock[0] += lag_ms  # each Fetch comes a whole lag time after the one before
            task = await session_fetch(host, manager, follower, True)
            for p in range(PARTITIONS):
                ps = host.partitions[(TOPIC, p)]
                state = ps.core.replica_states[FOLLOWER]
                assert state.last_caught_up_time_ms == clock[0], p
                assert state.log_end_offset == follower.offsets[p] == ps.log.log_end_offset
                assert ps.core.maybe_shrink_isr(ps.log, clock[0] + 1) == []
            append(host, 1, b"x")  # wakes and answers the parked Fetch
            follower.answer(await asyncio.wait_for(task, 10))

    asyncio.run(scenario())


def test_a_follower_that_stops_fetching_is_not_kept_in_sync_by_its_session(
        tmp_path: Path) -> None:
    """The session remembers offsets, not fetches: with no Fetch for longer than the lag time
    the follower is out of sync on every partition of the session, as without one."""
    clock = [NOW_MS]

    async def scenario() -> None:
        host, _ = leader(tmp_path)
        image = MetadataImage()
        image.topics[TOPIC] = TopicImage(TOPIC, TOPIC_ID, {})
        manager = ReplicaManager(LEADER, lambda: image, lambda: clock[0])
        follower = SessionFollower()
        append(host, 0, b"zero")
        follower.answer(await (await session_fetch(host, manager, follower, False)))
        append(host, 1, b"one")  # the follower never fetches it
        ps = host.partitions[(TOPIC, 1)]
        lag_ms = ps.core.config.replica_lag_time_max_ms
        effects = ps.core.maybe_shrink_isr(ps.log, clock[0] + lag_ms + 1)
        assert [e.request.new_isr for e in effects] == [(LEADER,)]

    asyncio.run(scenario())
