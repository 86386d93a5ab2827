"""The one interpreter of the quorum core's effects against a real metadata ``Log``.

The controller process and the simulator both hold a ``QuorumDriver``; they differ only in the
``QuorumPorts`` (a socket or the simulated network, a clock) and in the file system under the
log and the ``quorum-state`` file (the real one, or a ``MemoryFileSystem`` that loses unsynced
bytes on a crash). Every durability rule of the quorum is applied here, once:

* the election state is written (fsynced) before any message after it leaves;
* a leader counts only what it has flushed (append, flush, then ``after_leader_append``);
* a follower flushes what it fetched before its next fetch reports the new end offset;
* a truncation is durable before the core hears of it (``Log.truncate_to`` flushes);
* a snapshot fetched from the leader is whole, checked and fsynced before the log restarts at
  its end offset, and the log restarts before the core (and the shell) hear of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from floodmark.controller.quorum.core import QuorumCore
from floodmark.controller.quorum.effects import (
    AppendFetched,
    AppendLeaderChange,
    AppendSnapshotChunk,
    AppendVoters,
    AppendVoterSet,
    HighWatermarkChanged,
    PersistElectionState,
    QuorumEffect,
    RoleChanged,
    Send,
    TruncateTo,
)
from floodmark.controller.quorum.messages import (
    FetchSnapshotResponse,
    QuorumFetchResponse,
    QuorumMessage,
)
from floodmark.controller.quorum.roles import ElectionState
from floodmark.controller.quorum.rules import QuorumLogView
from floodmark.errors import ErrorCode
from floodmark.records import Record, build_batch

LEADER_CHANGE = "leader_change"
VOTERS = "voters"
VOTER_SET = "voter_set"  # Kafka's VotersRecord (``voters`` binds one voter to its data dir)
MAX_FETCH_BYTES = 1 << 20


class QuorumPorts(Protocol):
    """What only the shell can do."""

    def send(self, destination: int, message: QuorumMessage, records: bytes) -> None:
        """Deliver ``message`` (with ``records`` for a fetch answer that has some)."""

    def high_watermark_changed(self, old: int, new: int) -> None:
        """The metadata HW moved: records below it are committed (apply them, answer writers)."""

    def role_changed(self, change: RoleChanged) -> None:
        """Became leader (start writing), or stopped being it."""


class AppendedRange(Protocol):
    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


class ReadRecords(Protocol):
    @property
    def records(self) -> bytes | bytearray | memoryview: ...


class QuorumLog(QuorumLogView, Protocol):
    """What the driver does to the metadata log: ``floodmark.storage.Log`` (the controller, the
    simulator) or the model checker's log of values. ``flush`` makes everything appended
    durable; ``truncate_to`` and ``truncate_fully_and_start_at`` are durable when they return."""

    def append_as_leader(self, batches: bytes | bytearray | memoryview, leader_epoch: int,
                         now_ms: int) -> AppendedRange: ...

    def append_as_follower(self, batches: bytes | bytearray | memoryview,
                           now_ms: int) -> object: ...

    def flush(self, now_ms: int | None = None) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def assign_epoch(self, epoch: int, start_offset: int) -> None: ...

    def read(self, start_offset: int, max_bytes: int,
             max_offset_exclusive: int | None = None) -> ReadRecords: ...


class ElectionStateStore(Protocol):
    """The ``quorum-state`` file (``QuorumStateFile``): ``write`` returns once it is durable."""

    def write(self, state: ElectionState) -> None: ...


class SnapshotFiles(Protocol):
    """The snapshots beside the metadata log (``controller.snapshot.SnapshotStore``)."""

    def read_chunk(self, end_offset: int, epoch: int, position: int, max_bytes: int) -> bytes:
        """Bytes of a snapshot this voter has, from ``position``."""

    def receive_chunk(self, end_offset: int, epoch: int, position: int, size: int,
                      chunk: bytes) -> tuple[int, bytes | None]:
        """Store a chunk of the leader's snapshot: (bytes held so far, the whole snapshot once
        complete and checked, else None). A bad whole snapshot is dropped (0 bytes held)."""

    def installed(self, end_offset: int, epoch: int, data: bytes) -> None:
        """A fetched snapshot is now this voter's state (the shell loads it)."""


def leader_change_record(effect: AppendLeaderChange) -> bytes:
    return json.dumps({"type": LEADER_CHANGE, "epoch": effect.epoch, "leader": effect.leader_id,
                       "voters": list(effect.voters)}, sort_keys=True).encode()


def voters_record(effect: AppendVoters) -> bytes:
    return json.dumps({"type": VOTERS, "epoch": effect.epoch, "voter": effect.voter_id,
                       "directory_id": effect.directory_id}, sort_keys=True).encode()


def voter_set_record(effect: AppendVoterSet) -> bytes:
    record: dict[str, object] = {"type": VOTER_SET, "epoch": effect.epoch,
                                 "voters": [[v, d] for v, d in effect.voters]}
    if effect.endpoints:
        record["endpoints"] = [[v, e] for v, e in effect.endpoints]
    return json.dumps(record, sort_keys=True).encode()


def _quorum_record(effect: AppendLeaderChange | AppendVoters | AppendVoterSet) -> bytes:
    if isinstance(effect, AppendLeaderChange):
        return leader_change_record(effect)
    if isinstance(effect, AppendVoters):
        return voters_record(effect)
    return voter_set_record(effect)


@dataclass(eq=False, slots=True)
class QuorumDriver:
    core: QuorumCore
    log: QuorumLog
    state_file: ElectionStateStore
    ports: QuorumPorts
    fetch_max_bytes: int = MAX_FETCH_BYTES  # per answer; at least one whole batch (KIP-74)
    snapshots: SnapshotFiles | None = None  # None: no snapshots (the log is never cut)
    snapshot_chunk_bytes: int = MAX_FETCH_BYTES  # per FetchSnapshot answer
    on_voters_record: Callable[[int, bytes], None] | None = None
    """The leader appended a ``voters`` record of its own (offset, value): a shell that keeps
    its own view of the log's offsets (the active controller) accounts for it."""

    def start(self, now_ms: int) -> None:
        self.apply(self.core.start(self.log, now_ms), now_ms)

    def tick(self, now_ms: int) -> None:
        self.apply(self.core.tick(self.log, now_ms), now_ms)

    def deliver(self, src: int, message: QuorumMessage, records: bytes, now_ms: int) -> None:
        """A message arrived (``records``: what came with a fetch answer)."""
        self.apply(self.core.handle(src, message, self.log, now_ms), now_ms, records)

    def resign(self, now_ms: int) -> None:
        self.apply(self.core.resign(self.log, now_ms), now_ms)

    def leader_disconnected(self, leader_id: int, now_ms: int) -> None:
        """The shell's connection to ``leader_id`` closed: the core decides what it means."""
        self.apply(self.core.leader_disconnected(leader_id, now_ms), now_ms)

    def add_voter(self, voter_id: int, directory_id: str, now_ms: int
                  ) -> tuple[ErrorCode, str, int]:
        """AddRaftVoter (``QuorumCore.add_voter``): (error, message, offset of the voter set
        record); the change holds once the high watermark passes that offset."""
        error, message, offset, effects = self.core.add_voter(voter_id, directory_id, self.log,
                                                              now_ms)
        self.apply(effects, now_ms)
        return error, message, offset

    def remove_voter(self, voter_id: int, directory_id: str, now_ms: int
                     ) -> tuple[ErrorCode, str, int]:
        """RemoveRaftVoter (``QuorumCore.remove_voter``), as ``add_voter``."""
        error, message, offset, effects = self.core.remove_voter(voter_id, directory_id,
                                                                 self.log, now_ms)
        self.apply(effects, now_ms)
        return error, message, offset

    def update_voter(self, voter_id: int, directory_id: str, endpoint: str, now_ms: int
                     ) -> tuple[ErrorCode, str, int]:
        """UpdateRaftVoter (``QuorumCore.update_voter``), as ``add_voter``."""
        error, message, offset, effects = self.core.update_voter(voter_id, directory_id,
                                                                 endpoint, self.log, now_ms)
        self.apply(effects, now_ms)
        return error, message, offset

    def append_as_leader(self, values: list[bytes], now_ms: int) -> tuple[int, int]:
        """The active controller writes: one batch stamped with the leader's epoch, flushed.
        Returns (first offset, last offset); committed once the HW passes the last."""
        if not self.core.is_leader:
            raise RuntimeError("only the quorum leader appends")
        batch = build_batch([Record(i, now_ms, None, v) for i, v in enumerate(values)])
        info = self.log.append_as_leader(bytearray(batch), self.core.epoch, now_ms)
        self.log.flush(now_ms)
        self.apply(self.core.after_leader_append(self.log, now_ms), now_ms)
        return info.first_offset, info.last_offset

    def apply(self, effects: Iterable[QuorumEffect], now_ms: int, records: bytes = b"") -> None:
        for effect in effects:
            if isinstance(effect, PersistElectionState):
                self.state_file.write(effect.state)
            elif isinstance(effect, Send):
                self.ports.send(effect.destination, effect.message, self._records_for(effect))
            elif isinstance(effect, AppendLeaderChange | AppendVoters | AppendVoterSet):
                value = _quorum_record(effect)
                batch = build_batch([Record(0, now_ms, None, value)])
                info = self.log.append_as_leader(bytearray(batch), effect.epoch, now_ms)
                self.log.flush(now_ms)
                if (isinstance(effect, AppendVoters | AppendVoterSet)
                        and self.on_voters_record is not None):
                    self.on_voters_record(info.first_offset, value)
                self.apply(self.core.after_leader_append(self.log, now_ms), now_ms)
            elif isinstance(effect, AppendFetched):
                if records:
                    self.log.append_as_follower(records, now_ms)
                    self.log.flush(now_ms)
                self.apply(self.core.after_follower_append(self.log, effect.response), now_ms)
            elif isinstance(effect, TruncateTo):
                self.log.truncate_to(effect.offset)
                self.apply(self.core.after_truncate(self.log), now_ms)
            elif isinstance(effect, AppendSnapshotChunk):
                self._append_snapshot_chunk(effect.response, records, now_ms)
            elif isinstance(effect, HighWatermarkChanged):
                self.ports.high_watermark_changed(effect.old, effect.new)
            elif isinstance(effect, RoleChanged):
                self.ports.role_changed(effect)
            else:  # pragma: no cover - the effect union is closed
                raise TypeError(f"unknown quorum effect {effect!r}")

    def _append_snapshot_chunk(self, resp: FetchSnapshotResponse, chunk: bytes,
                               now_ms: int) -> None:
        if self.snapshots is None:
            return
        end, epoch = resp.snapshot_end_offset, resp.snapshot_epoch
        received, whole = self.snapshots.receive_chunk(end, epoch, resp.position, resp.size,
                                                       chunk)
        if whole is not None:
            self.log.truncate_fully_and_start_at(end)
            self.log.assign_epoch(epoch, end)
            self.snapshots.installed(end, epoch, whole)
        self.apply(self.core.after_snapshot_chunk(self.log, resp, received, whole is not None,
                                                  now_ms), now_ms)

    def _records_for(self, effect: Send) -> bytes:
        message = effect.message
        if isinstance(message, FetchSnapshotResponse):
            if self.snapshots is None or message.position < 0:
                return b""
            return self.snapshots.read_chunk(message.snapshot_end_offset, message.snapshot_epoch,
                                             message.position, self.snapshot_chunk_bytes)
        if not isinstance(message, QuorumFetchResponse) or not message.has_records:
            return b""
        info = self.log.read(message.read_from, self.fetch_max_bytes, message.read_upto)
        return bytes(info.records)
