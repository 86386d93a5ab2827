"""What the checker and the step tables see of one simulated replica: a mirror of its log as
(epoch, value) entries, decoded from the bytes the storage holds, the ``spec.partition``
view the invariants judge, and a snapshot of its state.

No rule lives here: the replica's state is the shared core's (``replication.Partition``) and
its log is the real storage's; this only reads them in the simulator's vocabulary (a record's
value as text, a transaction marker as ``COMMIT(p7)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from floodmark.records import AbortedTracker, iter_batches
from floodmark.replication import FetchRead, LeaderState, Partition
from floodmark.spec import Entry, ReplicaView, decode_entries
from floodmark.storage import Log


@dataclass(slots=True)
class LogMirror:
    """The log's entries, index = offset, kept in step with every append and truncation."""

    entries: list[Entry] = field(default_factory=list)
    version: int = 0
    """Bumped by every change of ``entries``: equal versions of one mirror, equal entries (the
    checker judges log matching again only when some replica's log or HW changed)."""

    def load(self, log: Log) -> None:
        self.entries = [(epoch, value) for _o, epoch, value in decode_entries(log.read_all())]
        self.version += 1
        assert len(self.entries) == log.log_end_offset, "mirror out of step with the log"

    def append(self, epoch: int, value: str) -> None:
        self.entries.append((epoch, value))
        self.version += 1

    def append_records(self, records: bytes | bytearray | memoryview) -> None:
        self.entries.extend((epoch, value) for _o, epoch, value in decode_entries(records))
        self.version += 1

    def truncate(self, after: int, *, fully: bool) -> None:
        if fully:
            self.entries = [(-1, "")] * after  # below the log start: unknown
        else:
            del self.entries[after:]
        self.version += 1


def replica_view(name: str, partition: Partition, mirror: LogMirror) -> ReplicaView:
    """The replica as the shared invariants see it (``floodmark.spec.partition``)."""
    return ReplicaView(name, mirror.entries, partition.high_watermark, partition.leader_epoch,
                       partition.is_leader, partition.last_stable_offset)


Served = tuple[int, int, str]
"""A record a consumer was served: (offset, epoch, value)."""


def consumer_kept(read: FetchRead, fetch_offset: int) -> tuple[Served, ...]:
    """What a consumer keeps of a read (``replication.reads.read_for_fetch``), as a client
    does: not the records of aborted transactions nor the markers (``records.AbortedTracker``
    over the read's aborted list), nor records before its position or at or past the read's
    bound."""
    if read.records is None:
        return ()
    tracker = (None if read.aborted is None else AbortedTracker.from_response(
        [(a.producer_id, a.first_offset) for a in read.aborted]))
    kept: list[Served] = []
    for _position, header in iter_batches(read.records.records, validate=False):
        if (tracker is not None and tracker.skip(header)) or header.is_control:
            continue
        kept.extend(e for e in decode_entries(bytes(header.batch_bytes()))
                    if fetch_offset <= e[0] < read.bound.read_upto)
    return tuple(kept)


DOWN: dict[str, Any] = {"log": [], "leo": -1, "hw": -1, "epochs": [], "alive": False}


def snapshot(partition: Partition, log: Log, mirror: LogMirror,
             name_of: Callable[[int], str]) -> dict[str, Any]:
    """{"log": [[offset, epoch, value]...], "leo", "hw", "epochs", ...} of a live replica."""
    p = partition
    out: dict[str, Any] = {
        "log": [[i, e, v] for i, (e, v) in enumerate(mirror.entries)],
        "leo": log.log_end_offset,
        "hw": p.high_watermark,
        "lso": p.last_stable_offset,
        "open_txns": {f"p{pid}": first
                      for pid, first in sorted(p.producers.open_transactions().items())},
        "epochs": log.epoch_cache.as_pairs(),
        "alive": True,
        "role": "leader" if isinstance(p.role, LeaderState) else "follower" if p.role else "none",
        "leader_epoch": p.leader_epoch,
    }
    if p.is_leader:
        out["remote_leos"] = {name_of(r): leo for r, leo in p.remote_log_end_offsets().items()}
        out["isr"] = [name_of(r) for r in p.isr]
    return out
