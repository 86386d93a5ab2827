"""Metadata snapshots (KIP-630): the image at a committed offset and epoch, as records.

A snapshot is the list of records that, replayed into an empty ``MetadataImage``, rebuild the
image as of ``end_offset`` (the offset after the last record it covers) — Kafka's idea: a
snapshot is a metadata log whose history was folded away. It lives in the metadata log
directory as ``<end_offset:020d>-<epoch:010d>.checkpoint`` (Kafka's naming), written to a
``.part`` file, fsynced, renamed, the directory fsynced.

File format (text): one header line, JSON ``{"format": 1, "end_offset", "epoch", "records": n,
"crc32": c}``, then ``n`` lines, one JSON record each; ``crc32`` covers every byte after the
header line. A file that does not parse, has the wrong count or CRC, or whose header does not
match its name, is torn or corrupt: ``SnapshotStore.latest`` skips it with one log line.

``SnapshotStore`` is the one place snapshot bytes touch a file system (the controller's real
one, the simulator's ``MemoryFileSystem``); it also holds the chunked transfer (FetchSnapshot):
``read_chunk`` on the leader, ``begin_receive``/``receive_chunk`` on a follower.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from floodmark.controller.delegation_tokens import token_record
from floodmark.controller.image import (
    MetadataImage,
    MetadataRecord,
    TopicImage,
    UnappliedRecord,
    acl_to_record,
    quota_to_record,
    registration_to_record,
)
from floodmark.controller.scram import credential_record
from floodmark.errors import CorruptDataError
from floodmark.storage import FileHandle, FileSystem, Log

log = logging.getLogger(__name__)

FORMAT = 1
SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
RETAINED = 2
"""Snapshots kept: the newest and the one before it (the log is kept from the older one, so a
newest snapshot found corrupt at restart falls back to the previous one plus the log)."""


class CorruptSnapshotError(CorruptDataError, ValueError):
    pass


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Kafka's OffsetAndEpoch: the snapshot covers offsets below ``end_offset``; ``epoch`` is
    the epoch of the record at ``end_offset - 1``."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"


def parse_file_name(name: str) -> SnapshotId | None:
    match = _NAME.match(name)
    return SnapshotId(int(match.group(1)), int(match.group(2))) if match else None


# -- image <-> records ---------------------------------------------------------------------------
IMAGE_FIELDS = frozenset({"next_offset", "cluster_id", "brokers", "topics", "next_producer_id",
                          "broker_configs", "group_configs", "reassignments", "acls", "scram_credentials",
                          "client_quotas", "features", "delegation_tokens",
                          "voter_set"})
"""Every attribute of ``MetadataImage`` that ``image_records`` writes (a test compares this
with the class, so a new image field cannot be forgotten by snapshots)."""


def _with_directories(rec: MetadataRecord, topic: TopicImage, partition: int) -> MetadataRecord:
    """A partition's record with its replicas' log directories (KIP-858), where any is known."""
    if topic.directories.get(partition):
        rec["directories"] = topic.directories_of(partition)
    return rec


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """Records that replay into an empty image to give ``image`` (all but ``next_offset``)."""
    out: list[MetadataRecord] = []
    if image.cluster_id:
        out.append({"type": "cluster_id", "cluster_id": image.cluster_id})
    out.extend({"type": "feature_level", "name": name, "level": level,
                "epoch": image.features.epoch} for name, level in image.features.levels)
    for bid, b in sorted(image.brokers.items()):
        reg: MetadataRecord = {"type": "register_broker", "broker_id": bid,
                               "broker_epoch": b.broker_epoch, "host": b.host, "port": b.port,
                               "incarnation": b.incarnation}
        if b.listeners:
            reg["listeners"] = [ep.to_record() for ep in b.listeners]
        if b.rack is not None:
            reg["rack"] = b.rack
        out.append(reg)
        if b.fenced:
            out.append({"type": "fence_broker", "broker_id": bid, "broker_epoch": b.broker_epoch})
        if b.in_controlled_shutdown:
            out.append({"type": "broker_shutdown", "broker_id": bid,
                        "broker_epoch": b.broker_epoch})
    for name, t in sorted(image.topics.items()):
        out.append({"type": "topic", "name": name, "topic_id": str(t.topic_id),
                    "configs": dict(t.configs)})
        out.extend(_with_directories(registration_to_record(name, p, reg), t, p)
                   for p, reg in sorted(t.partitions.items()))
    for (topic, partition), r in sorted(image.reassignments.items()):
        out.append({"type": "reassignment", "topic": topic, "partition": partition,
                    "target": list(r.target), "adding": list(r.adding),
                    "removing": list(r.removing), "original": list(r.original)})
    for resource, configs in sorted(image.broker_configs.items()):
        out.append({"type": "broker_configs", "resource": resource, "configs": dict(configs)})
    out.extend({"type": "group_configs", "name": name, "configs": dict(configs)}
               for name, configs in sorted(image.group_configs.items()))
    out.extend(acl_to_record(acl_id, b) for acl_id, b in sorted(image.acls.items()))
    for user, creds in sorted(image.scram_credentials.items()):
        out.extend(credential_record(user, cred) for _, cred in sorted(creds.items()))
    out.extend(token_record(t) for _, t in sorted(image.delegation_tokens.items()))
    out.extend(quota_to_record(e, key, value)
               for e, values in sorted(image.client_quotas.items(), key=lambda i: str(i[0]))
               for key, value in sorted(values.items()))
    out.append({"type": "producer_ids", "next": image.next_producer_id})
    if image.voter_set is not None:  # Kafka's snapshot carries its VotersRecord too
        out.append(image.voter_set.to_record())
    return out


def image_from_records(end_offset: int, records: list[MetadataRecord],
                       on_unapplied: Callable[[UnappliedRecord], None] | None = None
                       ) -> MetadataImage:
    """The image a snapshot holds. With ``on_unapplied`` a record that cannot be applied is
    skipped and reported (at the snapshot's end offset, where its effect would have been)."""
    image = MetadataImage()
    for rec in records:
        if on_unapplied is None:
            image.apply(rec)
            continue
        image.next_offset = 0
        image.apply_all([(0, rec)], lambda bad: on_unapplied(
            UnappliedRecord(end_offset, f"snapshot record: {bad.reason}")))
    image.next_offset = end_offset
    return image


# -- bytes ---------------------------------------------------------------------------------------
def encode_snapshot(snapshot_id: SnapshotId, records: list[MetadataRecord]) -> bytes:
    body = b"".join(json.dumps(rec, sort_keys=True).encode() + b"\n" for rec in records)
    header = {"format": FORMAT, "end_offset": snapshot_id.end_offset,
              "epoch": snapshot_id.epoch, "records": len(records), "crc32": zlib.crc32(body)}
    return json.dumps(header, sort_keys=True).encode() + b"\n" + body


def decode_snapshot(data: bytes) -> tuple[SnapshotId, list[MetadataRecord]]:
    """Raises ``CorruptSnapshotError`` (one line) for anything but a whole, intact snapshot."""
    head, sep, body = data.partition(b"\n")
    if not sep:
        raise CorruptSnapshotError("no header line (torn)")
    try:
        header = json.loads(head)
        snapshot_id = SnapshotId(int(header["end_offset"]), int(header["epoch"]))
        count, crc = int(header["records"]), int(header["crc32"])
        if int(header["format"]) != FORMAT:
            raise CorruptSnapshotError(f"unknown format {header['format']}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptSnapshotError(f"bad header ({exc})") from None
    if zlib.crc32(body) != crc:
        raise CorruptSnapshotError(f"crc32 mismatch ({len(body)} body bytes; torn or corrupt)")
    lines = body.split(b"\n")[:-1] if body else []
    if len(lines) != count:
        raise CorruptSnapshotError(f"{len(lines)} records, header says {count}")
    try:
        records = [json.loads(line) for line in lines]
    except ValueError as exc:
        raise CorruptSnapshotError(f"bad record ({exc})") from None
    if not all(isinstance(r, dict) and "type" in r for r in records):
        raise CorruptSnapshotError("a record is not a metadata record")
    return snapshot_id, records


# -- files ---------------------------------------------------------------------------------------
class SnapshotStore:
    """The snapshots in one metadata log directory."""

    def __init__(self, fs: FileSystem, directory: str,
                 on_installed: Callable[[SnapshotId, list[MetadataRecord]], None] | None = None
                 ) -> None:
        """``on_installed``: a snapshot fetched from the leader became this voter's state."""
        self.fs = fs
        self.on_installed = on_installed
        self.directory = directory.rstrip("/")
        fs.mkdirs(self.directory)
        self._receiving: tuple[SnapshotId, FileHandle] | None = None
        self._sizes: dict[SnapshotId, int] = {}
        for name in fs.listdir(self.directory):
            if name.endswith(PARTIAL_SUFFIX):  # a write or a transfer a crash interrupted
                fs.remove(self._path(name))

    def _path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    def ids(self) -> list[SnapshotId]:
        """Every snapshot file present, oldest first (valid or not)."""
        found = (parse_file_name(n) for n in self.fs.listdir(self.directory))
        return sorted(s for s in found if s is not None)

    def write(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Durably: a ``.part`` file, fsynced, renamed, the directory fsynced."""
        temp = self._path(snapshot_id.file_name + PARTIAL_SUFFIX)
        if self.fs.exists(temp):
            self.fs.remove(temp)
        handle = self.fs.open(temp)
        try:
            handle.write(data)
            handle.fsync()
        finally:
            handle.close()
        self.fs.rename(temp, self._path(snapshot_id.file_name))
        self.fs.fsync_dir(self.directory)
        self._sizes[snapshot_id] = len(data)

    def read(self, snapshot_id: SnapshotId) -> bytes:
        return self.fs.read_file(self._path(snapshot_id.file_name))

    def size(self, snapshot_id: SnapshotId) -> int:
        if snapshot_id not in self._sizes:
            self._sizes[snapshot_id] = self.fs.size(self._path(snapshot_id.file_name))
        return self._sizes[snapshot_id]

    def latest(self) -> tuple[SnapshotId, list[MetadataRecord]] | None:
        """The newest snapshot that decodes intact; each bad newer one costs one log line."""
        for snapshot_id in reversed(self.ids()):
            try:
                found, records = decode_snapshot(self.read(snapshot_id))
                if found != snapshot_id:
                    raise CorruptSnapshotError(f"header says {found}")
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("ignoring snapshot %s: %s", self._path(snapshot_id.file_name), exc)
                continue
            return snapshot_id, records
        return None

    def delete_before(self, snapshot_id: SnapshotId) -> None:
        for old in self.ids():
            if old < snapshot_id:
                self.fs.remove(self._path(old.file_name))
                self._sizes.pop(old, None)

    def retained_start(self) -> int:
        """Where the log must still begin: the older of the retained snapshots (0: keep all)."""
        kept = self.ids()[-RETAINED:]
        return kept[0].end_offset if len(kept) == RETAINED else 0

    def prune(self) -> None:
        """Keep the newest ``RETAINED`` snapshots."""
        kept = self.ids()[-RETAINED:]
        if kept:
            self.delete_before(kept[0])

    # -- FetchSnapshot (``quorum.driver.SnapshotFiles``) ------------------------------------
    def read_chunk(self, end_offset: int, epoch: int, position: int, max_bytes: int) -> bytes:
        path = self._path(SnapshotId(end_offset, epoch).file_name)
        if not self.fs.exists(path):
            return b""
        handle = self.fs.open(path, create=False)
        try:
            return handle.read_at(position, max_bytes)
        finally:
            handle.close()

    def receive_chunk(self, end_offset: int, epoch: int, position: int, size: int,
                      chunk: bytes) -> tuple[int, bytes | None]:
        """A follower stores a chunk of the leader's snapshot (position 0 starts over, unless
        this very snapshot is partly held: then nothing is written). Returns
        (bytes held, the whole snapshot once ``size`` bytes arrived and it decodes — then it is
        also installed under its name — else None). A chunk that does not continue the transfer
        is dropped; a whole snapshot that does not decode is dropped (0 bytes held)."""
        snapshot_id = SnapshotId(end_offset, epoch)
        temp = self._path(snapshot_id.file_name + PARTIAL_SUFFIX)
        receiving = self._receiving
        if (position == 0 and receiving is not None and receiving[0] == snapshot_id
                and 0 < receiving[1].size() < size):
            # Asked again from 0 (the voter's role changed meanwhile): keep what is held, the
            # voter continues from there.
            return receiving[1].size(), None
        if position == 0:
            if receiving is not None:
                receiving[1].close()
            if self.fs.exists(temp):
                self.fs.remove(temp)
            receiving = self._receiving = (snapshot_id, self.fs.open(temp))
        if receiving is None or receiving[0] != snapshot_id:
            return 0, None
        handle = receiving[1]
        if handle.size() != position:
            return handle.size(), None
        handle.write(chunk)
        held = handle.size()
        if held < size and chunk:
            return held, None
        self._receiving = None
        data = handle.read_at(0, held)
        handle.close()
        self.fs.remove(temp)
        try:
            found, _ = decode_snapshot(data)
            if found != snapshot_id or held != size:
                raise CorruptSnapshotError(f"header says {found}, {held} of {size} bytes")
        except CorruptSnapshotError as exc:
            log.warning("snapshot %s from the leader dropped: %s", snapshot_id.file_name, exc)
            return 0, None
        self.write(snapshot_id, data)
        return held, data

    def installed(self, end_offset: int, epoch: int, data: bytes) -> None:
        snapshot_id, records = decode_snapshot(data)
        self.prune()
        if self.on_installed is not None:
            self.on_installed(snapshot_id, records)


# -- the log beside the snapshots (the controller and the simulator share these rules) ----------
def open_with_snapshot(store: SnapshotStore, log_: Log, *, may_start_empty: bool
                       ) -> tuple[SnapshotId, list[MetadataRecord]] | None:
    """At start: the newest intact snapshot, with the log made to continue it — a log that
    ends before the snapshot, or starts after it, restarts empty at its end offset in its epoch
    (a follower installed it from the leader). Without a usable snapshot a log that does not
    start at 0 cannot be rebuilt: a voter (``may_start_empty``) starts over with an empty log
    (its leader will send a snapshot), anything else refuses to start (RuntimeError)."""
    found = store.latest()
    if found is None:
        if log_.log_start_offset > 0:
            if not may_start_empty:
                raise RuntimeError(f"metadata log starts at {log_.log_start_offset} and no "
                                   "snapshot covers what is below it")
            log.warning("no usable snapshot and the metadata log starts at %d; starting with "
                        "an empty log", log_.log_start_offset)
            log_.truncate_fully_and_start_at(0)
        return None
    snapshot_id = found[0]
    if (log_.log_start_offset > snapshot_id.end_offset
            or log_.log_end_offset < snapshot_id.end_offset):
        log_.truncate_fully_and_start_at(snapshot_id.end_offset)
        log_.assign_epoch(snapshot_id.epoch, snapshot_id.end_offset)
    cut_log_before(log_, store.retained_start(), now_ms=0)
    return found


def cut_log_before(log_: Log, offset: int, *, now_ms: int) -> None:
    """Move the log start offset to ``offset`` (a retained snapshot covers what is below) and
    delete the whole segments below it: the storage layer's DeleteRecords and retention."""
    if log_.maybe_increment_log_start_offset(offset, offset):
        log_.apply_retention(now_ms, offset)


def snapshot_epoch(log_: Log, end_offset: int) -> int:
    """The epoch of the record at ``end_offset - 1`` (the snapshot's epoch)."""
    return max(0, log_.epoch_cache.epoch_for_offset(end_offset - 1))
