"""The broker's share groups: the coordinator core (membership), the share partitions this
broker leads (``partition.SharePartition``, one per group and partition), the share sessions,
and the persister that keeps each share partition's state at its share coordinator. It decides
nothing itself: the cores do; it loads, keeps and stores them. No sockets here; the handlers
(``broker/handlers/share_group_apis``) translate the wire.

A share partition is loaded at this leader before it serves it (``load``): its state is read
from the share coordinator (``persister``; Kafka's ReadShareGroupState, which also fences the
previous leader of the partition), or, when none was ever written, placed by
``share.auto.offset.reset`` and written. A share partition kept from an earlier leader epoch
is loaded again the same way. Every change is written (``save``) before the request that made
it is answered; a write that fails drops the share partition here, so the next request loads
what the coordinator holds: nothing is answered that a failover could forget.

**A new leader epoch at the same leader.** The leader epoch can move on while this broker keeps
leading the partition (re-elected after its controller session lapsed while it was the only
in-sync replica; a re-registration). Loading again from the coordinator would throw away the
locks this broker holds: a record it had just handed out (its write landed before the new
epoch's read) came back AVAILABLE and went to a second member while the first still held it.
So the load at the new epoch reads first (that fences every later write at the old epoch) and,
when the coordinator holds a state this share partition itself stored or is storing (no other
leader changed it meanwhile), keeps the same share partition, locks and all, at the new epoch
(Kafka keeps its ``SharePartition`` until the broker stops leading). A write fenced at the old
epoch is then made again at the new one with the current state, which holds its change.

A change is saved as the share partition it was made on (``Change``), never by key alone: a
request that changed a share partition which was replaced meanwhile (loaded again from the
coordinator) is answered as not stored. Saving whatever is loaded under the key answered an
ACCEPT as stored that was never written, and the records were delivered again as new.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from floodmark.broker.config import BrokerConfig
from floodmark.broker.setting_keys import GROUP_SHARE_ENABLE, GROUP_SHARE_MAX_SIZE
from floodmark.broker.share_group.coordinator import (
    SHARE_GROUP_MAX_SIZE_DEFAULT,
    ShareGroupConfig,
    ShareGroupCoordinator,
    TopicInfo,
    TopicPartition,
)
from floodmark.broker.share_group.partition import (
    OffsetReset,
    ShareConfig,
    SharePartition,
    ShareState,
    parse_reset,
)
from floodmark.broker.share_group.persister import SharePersister
from floodmark.broker.share_group.sessions import ShareSession, ShareSessionCache
from floodmark.errors import ErrorCode
from floodmark.group_configs import effective
from floodmark.groups import GroupView
from floodmark.groups import share_records as sg_records
from floodmark.metadata import TopicMeta

log = logging.getLogger(__name__)
ShareKey = tuple[str, uuid.UUID, int]  # group, topic id, partition
Change = tuple[ShareKey, SharePartition]  # a share partition a request changed
WRITE_ATTEMPTS = 3  # a save fenced by a new epoch of the same leader is written again
OffsetAt = Callable[[int], int | None]  # a duration (ms) -> the first offset no older, or None
StoreRecords = Callable[[str, list[tuple[bytes, bytes | None]]], Awaitable[ErrorCode]]


@dataclass(frozen=True, slots=True)
class ShareSettings:
    enabled: bool = False  # group.share.enable
    group: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    partition: ShareConfig = field(default_factory=ShareConfig)
    reset: OffsetReset = OffsetReset.LATEST  # share.auto.offset.reset
    read_committed: bool = False  # share.isolation.level
    reset_duration_ms: int = 0  # share.auto.offset.reset=by_duration:<this>


@dataclass
class LoadedPartition:
    """A share partition loaded at this leader. ``stored``: the last state the share
    coordinator confirmed holding (read or written); ``sending``: the states being written.
    A stored state among them means no other leader changed it since."""

    core: SharePartition
    leader_epoch: int
    stored: ShareState | None = None
    sending: list[ShareState] = field(default_factory=list)

    def holds_mine(self, state: ShareState) -> bool:
        return state == self.stored or state in self.sending


class ShareGroups:
    def __init__(self, settings: ShareSettings, persister: SharePersister,
                 store_records: StoreRecords,
                 max_size: int = SHARE_GROUP_MAX_SIZE_DEFAULT) -> None:
        """``store_records(group, pairs)``: append a group's records to its
        ``__consumer_offsets`` partition, answered once replicated."""
        self.settings = settings
        # each share group's own settings (its group configs over the broker's): the broker
        # keeps them up to date from its metadata (``set_group_settings``)
        self.group_settings: dict[str, ShareSettings] = {}
        self.persister = persister
        self.store_records = store_records
        self._group_locks: dict[str, asyncio.Lock] = {}
        self.coordinator = ShareGroupCoordinator(settings.group, max_size)
        self.sessions = ShareSessionCache(idle_ms=settings.group.session_timeout_ms)
        self.partitions: dict[ShareKey, LoadedPartition] = {}
        self._loading: dict[tuple[ShareKey, int], asyncio.Future[ErrorCode]] = {}
        self._saving: set[asyncio.Task[dict[ShareKey, ErrorCode]]] = set()
        self._initializing: set[asyncio.Task[None]] = set()

    def settings_of(self, group_id: str) -> ShareSettings:
        """The settings ``group_id`` runs with: its group configs, else the broker's."""
        return self.group_settings.get(group_id, self.settings)

    def set_group_settings(self, group_settings: Mapping[str, ShareSettings]) -> None:
        """The share groups' own settings changed (group configs): they apply to the running
        groups at once, as in Kafka: the next heartbeat's interval and session, the share
        partitions' next lock, delivery count limit and window, the next placement of a start
        offset and the next fetch's isolation."""
        changed = {g for g in set(self.group_settings) | set(group_settings)
                   if self.group_settings.get(g) != group_settings.get(g)}
        self.group_settings = dict(group_settings)
        self.coordinator.group_configs = {g: s.group for g, s in group_settings.items()}
        for key, loaded in self.partitions.items():
            if key[0] in changed:
                loaded.core.config = self.settings_of(key[0]).partition

    def loaded(self, key: ShareKey, leader_epoch: int,
               log_start_offset: int) -> SharePartition | None:
        """The share partition of ``key`` when it is loaded at ``leader_epoch``."""
        loaded = self.partitions.get(key)
        if loaded is None or loaded.leader_epoch != leader_epoch:
            return None
        loaded.core.log_start_moved(log_start_offset)
        return loaded.core

    async def load(self, key: ShareKey, leader_epoch: int, log_start_offset: int,
                   fetch_bound: int, offset_for_duration: OffsetAt | None = None
                   ) -> tuple[ErrorCode, SharePartition | None]:
        """The share partition of ``key`` at this leader, read from its share coordinator
        (or started by ``share.auto.offset.reset`` and written) on first use at this leader
        epoch. ``fetch_bound``: the high watermark, or the last stable offset;
        ``offset_for_duration(ms)``: the first offset no older than ``ms`` (by_duration)."""
        core = self.loaded(key, leader_epoch, log_start_offset)
        if core is not None:
            return ErrorCode.NONE, core
        pending = self._loading.get((key, leader_epoch))
        if pending is None:
            pending = asyncio.ensure_future(self._load(key, leader_epoch, log_start_offset,
                                                       fetch_bound, offset_for_duration))
            self._loading[(key, leader_epoch)] = pending
            pending.add_done_callback(lambda _f: self._loading.pop((key, leader_epoch), None))
        err = await asyncio.shield(pending)
        if err is not ErrorCode.NONE:
            return err, None
        return ErrorCode.NONE, self.loaded(key, leader_epoch, log_start_offset)

    async def _load(self, key: ShareKey, leader_epoch: int, log_start_offset: int,
                    fetch_bound: int, offset_for_duration: OffsetAt | None) -> ErrorCode:
        err, snap = await self.persister.read(key, leader_epoch)
        if err is not ErrorCode.NONE:
            log.warning("share group %s partition %s-%d leader_epoch=%d: its state could not "
                        "be read from the share coordinator: %s", key[0], key[1], key[2],
                        leader_epoch, err.name)
            return err
        current = self.partitions.get(key)
        if snap is not None and current is not None and current.leader_epoch < leader_epoch \
                and snap.state.start_offset >= 0 and current.holds_mine(snap.state):
            # the same leader at a new epoch, and nobody else changed the state: keep it (no
            # await since the read, so no write at the old epoch has been answered meanwhile)
            log.info("share group %s partition %s-%d leader_epoch=%d: leader epoch moved on "
                     "from %d at this leader; the share partition and its locks are kept",
                     key[0], key[1], key[2], leader_epoch, current.leader_epoch)
            current.leader_epoch = leader_epoch
            return ErrorCode.NONE
        settings = self.settings_of(key[0])
        core = SharePartition(settings.partition)
        if snap is not None and snap.state.start_offset >= 0:
            core.restore(snap.state)
            core.log_start_moved(log_start_offset)
            stored = snap.state
            log.info("share group %s partition %s-%d leader_epoch=%d: loaded, start offset "
                     "%d, end offset %d", key[0], key[1], key[2], leader_epoch,
                     core.start_offset, core.end_offset)
        else:
            # never written, or initialized by the group coordinator without a start offset
            # (InitializeShareGroupState): placed here, at the state epoch it was given
            by_duration = None
            if settings.reset is OffsetReset.BY_DURATION and offset_for_duration is not None:
                by_duration = offset_for_duration(settings.reset_duration_ms)
            core.initialize(settings.reset, log_start_offset,
                            max(log_start_offset, fetch_bound), by_duration)
            core.state_epoch = snap.state.state_epoch if snap is not None else 0
            stored = core.snapshot()
            err = await self.persister.write(key, stored, leader_epoch)
            if err is not ErrorCode.NONE:
                return err
            log.info("share group %s partition %s-%d leader_epoch=%d: started at offset %d "
                     "(share.auto.offset.reset=%s)", key[0], key[1], key[2], leader_epoch,
                     core.start_offset, settings.reset.value)
        current = self.partitions.get(key)
        if current is None or current.leader_epoch <= leader_epoch:
            self.partitions[key] = LoadedPartition(core, leader_epoch, stored)
        return ErrorCode.NONE

    async def save(self, changes: Iterable[Change]) -> dict[ShareKey, ErrorCode]:
        """Write the state of each changed share partition (before the change is answered). A
        share partition no longer loaded here, or replaced meanwhile, fails (what the request
        changed is not stored, so it is not answered as done); a write that failed drops it
        here (loaded again from the coordinator at its next use)."""
        cores: dict[ShareKey, list[SharePartition]] = {}
        for key, core in changes:
            known = cores.setdefault(key, [])
            if not any(c is core for c in known):
                known.append(core)
        keys = sorted(cores, key=lambda k: (k[0], str(k[1]), k[2]))
        errors = await asyncio.gather(*(self._write_all(k, cores[k]) for k in keys))
        return dict(zip(keys, errors, strict=True))

    async def _write_all(self, key: ShareKey, cores: list[SharePartition]) -> ErrorCode:
        """One request changed ``key``'s share partition and, after it was replaced (loaded
        again), its successor too: the successor is written, and the key still fails (the
        change made on the replaced one is not stored)."""
        loaded = self.partitions.get(key)
        current = [c for c in cores if loaded is not None and c is loaded.core]
        err = await self._write(key, current[0] if current else cores[0])
        if err is ErrorCode.NONE and len(cores) > len(current):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return err

    async def _write(self, key: ShareKey, core: SharePartition) -> ErrorCode:
        err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        for _attempt in range(WRITE_ATTEMPTS):
            loaded = self.partitions.get(key)
            if loaded is None or loaded.core is not core:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE  # dropped or replaced meanwhile
            state, epoch = core.snapshot(), loaded.leader_epoch
            loaded.sending.append(state)
            try:
                err = await self.persister.write(key, state, epoch)
            finally:
                loaded.sending.remove(state)
            if err is ErrorCode.NONE:
                loaded.stored = state
                return err
            if err is ErrorCode.FENCED_LEADER_EPOCH:
                # a load at a later epoch fenced it: when this leader keeps the share
                # partition there, its current state (with this change) is written again
                later = [f for (k, e), f in list(self._loading.items())
                         if k == key and e > epoch]
                for pending in later:
                    await asyncio.shield(pending)
                if self.partitions.get(key) is loaded and loaded.leader_epoch > epoch:
                    continue
            break
        log.warning("share group %s partition %s-%d: its state could not be written (%s): "
                    "it is loaded again from the share coordinator", key[0], key[1], key[2],
                    err.name)
        if self.partitions.get(key) is not None and self.partitions[key].core is core:
            del self.partitions[key]
        return err

    def save_later(self, changes: list[Change]) -> None:
        """``save`` without a request waiting on it (a member left or timed out: the records
        it held came back; a failed write drops the partition, which is read back)."""
        if changes:
            task = asyncio.get_running_loop().create_task(self.save(changes))
            self._saving.add(task)
            task.add_done_callback(self._saving.discard)

    def initialize_later(self, group_id: str, parts: list[TopicPartition], state_epoch: int,
                         topics: Mapping[str, TopicInfo], now_ms: Callable[[], int]) -> None:
        """InitializeShareGroupState for the partitions ``to_initialize`` marked, off the
        heartbeat's path (as Kafka's group coordinator); the outcome is stored in the group's
        ``ShareGroupStatePartitionMetadata``."""
        if parts:
            task = asyncio.get_running_loop().create_task(
                self._initialize(group_id, parts, state_epoch, topics, now_ms))
            self._initializing.add(task)
            task.add_done_callback(self._initializing.discard)

    async def _initialize(self, group_id: str, parts: list[TopicPartition], state_epoch: int,
                          topics: Mapping[str, TopicInfo], now_ms: Callable[[], int]) -> None:
        errors = await asyncio.gather(*(self.persister.initialize((group_id, *tp), state_epoch,
                                                                  -1) for tp in parts))
        done = [tp for tp, err in zip(parts, errors, strict=True) if err is ErrorCode.NONE]
        failed = [(tp, err) for tp, err in zip(parts, errors, strict=True)
                  if err is not ErrorCode.NONE]
        if failed:
            log.warning("share group %s: the share state of %d partitions could not be "
                        "initialized (first: %s-%d, %s); a later heartbeat tries again",
                        group_id, len(failed), failed[0][0][0], failed[0][0][1],
                        failed[0][1].name)
        else:
            log.info("share group %s state_epoch=%d: share state of %d partitions initialized",
                     group_id, state_epoch, len(done))
        await self.change(group_id, lambda: self.coordinator.state_initialized(
            group_id, done, [tp for tp, _err in failed]), topics, now_ms())

    async def reset(self, key: ShareKey, start_offset: int, leader_epoch: int) -> ErrorCode:
        """AlterShareGroupOffsets: the share partition starts over at ``start_offset`` (a new
        state epoch)."""
        err, core = await self.load(key, leader_epoch, start_offset, start_offset)
        if core is None:
            return err
        core.reset_to(start_offset)
        return (await self.save([(key, core)]))[key]

    async def forget(self, key: ShareKey) -> ErrorCode:
        """DeleteShareGroupOffsets: the group's state of the partition goes."""
        self.partitions.pop(key, None)
        return await self.persister.delete(key)

    async def change(self, group_id: str, change: Callable[[], object],
                     topics: Mapping[str, TopicInfo], now_ms: int) -> ErrorCode:
        """Run ``change`` (a call of the coordinator core) one at a time per group and store
        the records of what it changed (``records.changes``) in the group's
        ``__consumer_offsets`` partition before the caller answers; when they cannot be
        stored the group goes back to what it was (the core never runs ahead of its log)."""
        lock = self._group_locks.setdefault(group_id, asyncio.Lock())
        async with lock:
            before = self.coordinator.view(group_id)
            change()
            recs = sg_records.changes(group_id, before, self.coordinator.view(group_id))
            if not recs:
                return ErrorCode.NONE
            err = await self.store_records(group_id,
                                           [p for r in recs for p in sg_records.encode(r)])
            if err is not ErrorCode.NONE:
                log.warning("share group %s: storing its records failed (%s): the change is "
                            "undone", group_id, err.name)
                self.coordinator.restore(group_id, before, topics, now_ms)
            return err

    async def delete_group(self, group_id: str, cluster: Mapping[str, TopicMeta],
                           now_ms: int) -> ErrorCode:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else its
        records become tombstones and its state of every share partition is deleted at their
        share coordinators (``cluster``: the cluster's topics)."""
        topics = share_topics(cluster)
        keys = [(group_id, t.topic_id, p) for t in topics.values() for p in range(t.partitions)]
        refused: list[ErrorCode] = []
        err = await self.change(group_id, lambda: refused.append(
            self.coordinator.delete(group_id)), topics, now_ms)
        if refused and refused[0] is not ErrorCode.NONE:
            return refused[0]
        if err is not ErrorCode.NONE:
            return err
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
        errors = await asyncio.gather(*(self.persister.delete(k) for k in keys))
        return next((e for e in errors if e is not ErrorCode.NONE), ErrorCode.NONE)

    def load_groups(self, views: Mapping[str, GroupView], unloaded: Iterable[str],
                    topics: Mapping[str, TopicInfo], now_ms: int) -> None:
        """A ``__consumer_offsets`` partition was loaded: its share groups are what their
        records say (``unloaded``: the groups of that partition known here before)."""
        for group_id in unloaded:
            self.coordinator.groups.pop(group_id, None)
        for group_id, view in views.items():
            self.coordinator.restore(group_id, view, topics, now_ms)

    async def start_offset(self, key: ShareKey) -> tuple[ErrorCode, int]:
        """The share-partition start offset (-1: no state), as loaded here or stored."""
        loaded = self.partitions.get(key)
        if loaded is not None:
            return ErrorCode.NONE, loaded.core.start_offset
        return await self.persister.summary(key)

    def close_session(self, session: ShareSession) -> list[Change]:
        """A session ended (the member left or reopened it): what it held comes back."""
        changed: list[Change] = []
        for topic_id, index in session.partitions:
            key = (session.group_id, topic_id, index)
            loaded = self.partitions.get(key)
            if loaded is not None and loaded.core.release_member(session.member_id):
                changed.append((key, loaded.core))
        return changed

    def release_member(self, group_id: str, member_id: str) -> list[Change]:
        """The member left the group or its session at the coordinator timed out."""
        session = self.sessions.close(group_id, member_id)
        return [] if session is None else self.close_session(session)


def share_topics(cluster: Mapping[str, TopicMeta]) -> dict[str, TopicInfo]:
    """The topics a share group may subscribe to (every topic but the internal ones)."""
    return {name: TopicInfo(meta.topic_id, name, len(meta.partitions))
            for name, meta in cluster.items() if not meta.internal}


def share_settings(enabled: bool, values: Mapping[str, object]) -> ShareSettings:
    """Share-group settings from group-config values (``group_configs.effective``: a group's
    own over the broker's)."""
    reset, duration_ms = parse_reset(str(values["share.auto.offset.reset"]))
    return ShareSettings(
        enabled=enabled,
        group=ShareGroupConfig(
            session_timeout_ms=int(str(values["share.session.timeout.ms"])),
            heartbeat_interval_ms=int(str(values["share.heartbeat.interval.ms"]))),
        partition=ShareConfig(
            record_lock_duration_ms=int(str(values["share.record.lock.duration.ms"])),
            delivery_count_limit=int(str(values["share.delivery.count.limit"])),
            max_record_locks=int(str(values["share.partition.max.record.locks"]))),
        reset=reset, reset_duration_ms=duration_ms,
        read_committed=str(values["share.isolation.level"]) == "read_committed")


def share_groups_of(config: BrokerConfig, persister: SharePersister,
                    store_records: StoreRecords) -> ShareGroups:
    """The broker's share groups from its settings (``settings.DEFAULTS``' group.share.*, the
    defaults of every share group's group configs)."""
    settings = share_settings(config.value(GROUP_SHARE_ENABLE),
                              effective({}, config.get))
    return ShareGroups(settings, persister, store_records,
                       config.value(GROUP_SHARE_MAX_SIZE))
