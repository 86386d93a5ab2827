"""The broker's share groups: the coordinator core (membership), the share partitions this
broker leads (``partition.SharePartition``, one per group and partition), the share sessions,
and the store that keeps each share partition across restarts. It decides nothing itself:
the cores do; it loads, keeps and stores them. No sockets here; the handlers
(``broker/handlers/share_group_apis``) translate the wire.

A share partition is loaded on its first ShareFetch at this leader: from the store when the
stored state was written at this broker under the partition's current leader epoch or when no
other broker can lead the partition (it has one replica), else it starts over by
``share.auto.offset.reset`` (another leader may have served it meanwhile). A share partition
kept from an earlier leader epoch is loaded again the same way at its next fetch.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from floodmark.broker.config import BrokerConfig
from floodmark.broker.share_group.coordinator import ShareGroupConfig, ShareGroupCoordinator
from floodmark.broker.share_group.partition import (
    OffsetReset,
    ShareConfig,
    SharePartition,
    ShareState,
)
from floodmark.broker.share_group.sessions import ShareSession, ShareSessionCache
from floodmark.broker.share_group.state_store import ShareStateStore
from floodmark.errors import ErrorCode
from floodmark.storage.fs import FileSystem

log = logging.getLogger(__name__)
ShareKey = tuple[str, uuid.UUID, int]  # group, topic id, partition


@dataclass(frozen=True, slots=True)
class ShareSettings:
    enabled: bool = False  # group.share.enable
    group: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    partition: ShareConfig = field(default_factory=ShareConfig)
    reset: OffsetReset = OffsetReset.LATEST  # share.auto.offset.reset
    read_committed: bool = False  # share.isolation.level


@dataclass
class LoadedPartition:
    core: SharePartition
    leader_epoch: int


class ShareGroups:
    def __init__(self, settings: ShareSettings, store: ShareStateStore) -> None:
        self.settings = settings
        self.store = store
        self.coordinator = ShareGroupCoordinator(settings.group)
        self.sessions = ShareSessionCache(idle_ms=settings.group.session_timeout_ms)
        self.partitions: dict[ShareKey, LoadedPartition] = {}

    def partition(self, key: ShareKey, leader_epoch: int, single_replica: bool,
                  log_start_offset: int, fetch_bound: int) -> SharePartition:
        """``fetch_bound``: the high watermark, or the last stable offset (read_committed)."""
        """The share partition of ``key`` at this leader, loaded or started on first use."""
        loaded = self.partitions.get(key)
        if loaded is not None and loaded.leader_epoch == leader_epoch:
            loaded.core.log_start_moved(log_start_offset)
            return loaded.core
        core = SharePartition(self.settings.partition)
        stored = self.store.load(*key)
        epoch = -1 if stored is None else stored.leader_epoch
        if stored is not None and (single_replica or epoch == leader_epoch):
            core.restore(stored.state)
            core.log_start_moved(log_start_offset)
            log.info("share group %s partition %s-%d leader_epoch=%d: loaded, start offset "
                     "%d, end offset %d", key[0], key[1], key[2], leader_epoch,
                     core.start_offset, core.end_offset)
        else:
            if stored is not None:
                log.warning("share group %s partition %s-%d leader_epoch=%d: the stored state "
                            "was written at leader epoch %d, another leader may have served "
                            "since: starting over by share.auto.offset.reset=%s", key[0],
                            key[1], key[2], leader_epoch, epoch,
                            self.settings.reset.value)
            core.initialize(self.settings.reset, log_start_offset,
                            max(log_start_offset, fetch_bound))
        self.partitions[key] = LoadedPartition(core, leader_epoch)
        return core

    def save(self, key: ShareKey) -> None:
        """Store ``key``'s state (before the change is answered)."""
        loaded = self.partitions[key]
        self.store.save(*key, loaded.core.snapshot(), loaded.leader_epoch)

    def reset(self, key: ShareKey, start_offset: int, leader_epoch: int) -> None:
        """AlterShareGroupOffsets: the share partition starts over at ``start_offset``."""
        loaded = self.partitions.get(key)
        core = loaded.core if loaded is not None else SharePartition(self.settings.partition)
        core.reset_to(start_offset)
        self.partitions[key] = LoadedPartition(core, leader_epoch)
        self.save(key)

    def forget(self, key: ShareKey) -> None:
        """DeleteShareGroupOffsets: the group's state of the partition goes."""
        self.partitions.pop(key, None)
        self.store.delete(*key)

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of an empty share group: the group and the state this broker keeps of
        its partitions go (NON_EMPTY_GROUP while it has members)."""
        err = self.coordinator.delete(group_id)
        if err is ErrorCode.NONE:
            for key in [k for k in self.partitions if k[0] == group_id]:
                del self.partitions[key]
            for key in self.store.stored():
                if key[0] == group_id:
                    self.store.delete(*key)
        return err

    def stored_state(self, key: ShareKey) -> ShareState | None:
        loaded = self.partitions.get(key)
        if loaded is not None:
            return loaded.core.snapshot()
        stored = self.store.load(*key)
        return None if stored is None else stored.state

    def close_session(self, session: ShareSession) -> list[ShareKey]:
        """A session ended (the member left or reopened it): what it held comes back."""
        changed = []
        for topic_id, index in session.partitions:
            key = (session.group_id, topic_id, index)
            loaded = self.partitions.get(key)
            if loaded is not None and loaded.core.release_member(session.member_id):
                changed.append(key)
        return changed

    def release_member(self, group_id: str, member_id: str) -> list[ShareKey]:
        """The member left the group or its session at the coordinator timed out."""
        session = self.sessions.close(group_id, member_id)
        return [] if session is None else self.close_session(session)


def share_groups_of(config: BrokerConfig, fs: FileSystem, data_dir: Path) -> ShareGroups:
    """The broker's share groups from its settings (``settings.DEFAULTS``' group.share.*)."""
    settings = ShareSettings(
        enabled=config.get_bool("group.share.enable"),
        group=ShareGroupConfig(
            session_timeout_ms=config.get_int("group.share.session.timeout.ms"),
            heartbeat_interval_ms=config.get_int("group.share.heartbeat.interval.ms")),
        partition=ShareConfig(
            record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
            delivery_count_limit=config.get_int("group.share.delivery.count.limit"),
            max_record_locks=config.get_int("group.share.partition.max.record.locks")),
        reset=OffsetReset(str(config.get("share.auto.offset.reset"))),
        read_committed=str(config.get("share.isolation.level")) == "read_committed")
    return ShareGroups(settings, ShareStateStore(fs, data_dir))
