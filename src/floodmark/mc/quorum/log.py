"""The metadata log under the model checker's ``QuorumDriver``, and where a crash may strike.

``MetadataModelLog`` stands where the controller has a ``floodmark.storage.Log``: entries in
memory as ``(epoch, name)`` values, the real ``EpochCache``, real v2 batches on the wire (what a
leader appends and serves, what a follower stores), a ``recovery_point`` that only ``flush``
moves forward (``truncate_to`` is durable when it returns, as in the storage log). The storage
log has its own crash tests; this one keeps a model state a small tuple.

``IoPoints`` numbers the durable operations a step performs (appends, flushes, truncations,
``quorum-state`` writes, sends). A crash at point ``k`` lets the first ``k`` happen and not the
rest: the voter keeps what its disk holds then — the ``quorum-state`` last written, and of its
log everything flushed plus any prefix of what was appended after (a process kill keeps the
page cache, a power loss keeps only the flushed bytes, a torn write something between), which
is what ``MemoryFileSystem.crash`` gives the simulator's voters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from floodmark.records import iter_batches, set_base_offset, set_partition_leader_epoch
from floodmark.replication import EpochCache
from floodmark.spec import decode_entries

Entry = tuple[int, str]
"""A log entry: (epoch stamped into its batch, its name: ``m0``… or ``LC(c2)`` for the
leader-change record voter 2 wrote)."""


class Crashed(Exception):
    """Raised at the I/O point where the model crashes a voter mid-step."""


@dataclass(slots=True)
class IoPoints:
    crash_at: int | None = None
    count: int = 0

    def point(self) -> None:
        """Called before each durable operation: the crash happens here, before it."""
        if self.count == self.crash_at:
            raise Crashed
        self.count += 1


def record_name(value: str) -> str:
    """A short, unique name for a record value: client writes keep theirs; a leader-change
    record (``driver.leader_change_record``) is ``LC(c<leader>)`` (its epoch is the entry's), a
    voter set record ``VS(c1,c3)``, ``VS(c1,c3;c3@c3')`` when it names c3's endpoint
    (UpdateRaftVoter)."""
    if value.startswith("{"):
        data = json.loads(value)
        if data["type"] == "voter_set":  # VS(c1,c2): the voter set (KIP-853)
            moved = "".join(f";c{v}@{e}" for v, e in data.get("endpoints", ()))
            return "VS(" + ",".join(f"c{v}" for v, _d in data["voters"]) + moved + ")"
        return f"LC(c{data['leader']})"
    return value


class Batches:
    """Real batches for entries, built once per model: what the driver hands the log (any
    bytes, named by decoding them) and what a log serves at an offset (``encode``)."""

    __slots__ = ("_decoded", "_encoded", "_templates")

    def __init__(self) -> None:
        self._templates: dict[Entry, bytes] = {}
        self._encoded: dict[tuple[int, int, str], bytes] = {}
        self._decoded: dict[bytes, list[tuple[int, int, str]]] = {}

    def decode(self, data: bytes) -> list[tuple[int, int, str]]:
        """(offset, epoch, name) of each batch; the first time, each batch is kept as the
        template of its (epoch, name)."""
        found = self._decoded.get(data)
        if found is None:
            found = []
            for position, header in iter_batches(data, validate=False):
                batch = data[position: position + header.size]
                (_offset, epoch, value), = decode_entries(batch)
                name = record_name(value)
                self._templates.setdefault((epoch, name), batch)
                found.append((header.base_offset, epoch, name))
            self._decoded[data] = found
        return found

    def encode(self, offset: int, epoch: int, name: str) -> bytes:
        key = (offset, epoch, name)
        data = self._encoded.get(key)
        if data is None:
            buffer = bytearray(self._templates[(epoch, name)])
            set_base_offset(buffer, 0, offset)
            set_partition_leader_epoch(buffer, 0, epoch)
            data = self._encoded[key] = bytes(buffer)
        return data


@dataclass(frozen=True, slots=True)
class Appended:
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class Read:
    records: bytes


@dataclass(eq=False, slots=True)
class MetadataModelLog:
    """``QuorumLog`` over values (see the module docstring)."""

    entries: list[Entry]
    epoch_cache: EpochCache
    batches: Batches = field(repr=False)
    io: IoPoints = field(repr=False)
    recovery_point: int = 0

    @property
    def log_start_offset(self) -> int:
        return 0  # no snapshots in the model: the log is never cut from the start

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    def append_as_leader(self, batches: bytes | bytearray | memoryview, leader_epoch: int,
                         now_ms: int) -> Appended:
        self.io.point()
        buffer = bytearray(batches)
        first = len(self.entries)
        positions = [position for position, _h in iter_batches(buffer, validate=False)]
        for i, position in enumerate(positions):  # stamped as ``Log.append_as_leader`` does
            set_base_offset(buffer, position, first + i)
            set_partition_leader_epoch(buffer, position, leader_epoch)
        for _offset, epoch, name in self.batches.decode(bytes(buffer)):
            self.entries.append((epoch, name))
        self.epoch_cache.assign(leader_epoch, first)
        return Appended(first, len(self.entries) - 1)

    def append_as_follower(self, batches: bytes | bytearray | memoryview, now_ms: int) -> None:
        self.io.point()
        for offset, epoch, name in self.batches.decode(bytes(batches)):
            assert offset == len(self.entries), "non-contiguous follower append"
            self.entries.append((epoch, name))
            self.epoch_cache.assign(epoch, offset)

    def flush(self, now_ms: int | None = None) -> None:
        self.io.point()
        self.recovery_point = len(self.entries)

    def truncate_to(self, offset: int) -> None:
        self.io.point()
        del self.entries[offset:]
        self.epoch_cache.truncate_from_end(len(self.entries))
        self.recovery_point = min(self.recovery_point, len(self.entries))

    def truncate_fully_and_start_at(self, offset: int) -> None:  # pragma: no cover
        raise AssertionError("the model has no snapshots: its logs always start at offset 0")

    def assign_epoch(self, epoch: int, start_offset: int) -> None:  # pragma: no cover
        raise AssertionError("only a snapshot install assigns an epoch by itself")

    def read(self, start_offset: int, max_bytes: int,
             max_offset_exclusive: int | None = None) -> Read:
        """Whole batches from ``start_offset``, at least one, then while within ``max_bytes``."""
        end = len(self.entries) if max_offset_exclusive is None else min(
            max_offset_exclusive, len(self.entries))
        out: list[bytes] = []
        size = 0
        for offset in range(start_offset, end):
            data = self.batches.encode(offset, *self.entries[offset])
            if out and size + len(data) > max_bytes:
                break
            out.append(data)
            size += len(data)
        return Read(b"".join(out))
