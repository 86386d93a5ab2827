"""Kafka's text checkpoint files (``CheckpointFile``).

Format: a version line (0), a count line, then ``count`` entry lines. Offset checkpoints
(``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, one per data directory) hold ``topic partition offset`` lines;
``leader-epoch-checkpoint`` (one per partition directory) holds ``epoch start_offset`` lines.

Writes go to ``<file>.tmp``, are fsynced, renamed over the file, and the directory is fsynced, all
through the file-system seam. Reads reject a wrong version, a count mismatch or a malformed line
with ``CorruptCheckpointError`` naming the file and line; callers fall back to a safe rebuild.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from floodmark.errors import CorruptDataError
from floodmark.replication import EpochEntry
from floodmark.storage.fs import FileSystem

CHECKPOINT_VERSION = 0
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class CorruptCheckpointError(CorruptDataError, ValueError):
    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"corrupt checkpoint file {path}, line {line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _write_atomically(fs: FileSystem, path: str, text: str, *, sync_dir: bool = True) -> None:
    temp = path + ".tmp"
    if fs.exists(temp):
        fs.remove(temp)
    handle = fs.open(temp)
    try:
        handle.write(text.encode("utf-8"))
        handle.fsync()
    except OSError:
        # A full disk: leave the old file as it was and give back the space of the temp file.
        handle.close()
        if fs.exists(temp):
            fs.remove(temp)
        raise
    else:
        handle.close()
    fs.rename(temp, path)
    if sync_dir:
        fs.fsync_dir(posixpath.dirname(path) or ".")


def write_text_atomically(fs: FileSystem, path: str, text: str) -> None:
    """Replace ``path`` with ``text`` durably: temp file, fsync, rename, fsync the directory
    (the checkpoints' rule, for other small state files such as the quorum's)."""
    _write_atomically(fs, path, text)


def _read_lines(fs: FileSystem, path: str, fields: int) -> list[list[str]]:
    """Parse the framing; returns the entry lines split into ``fields`` tokens each."""
    try:
        text = fs.read_file(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(path, 1, f"not UTF-8 text ({exc})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CorruptCheckpointError(path, 1, "empty file, expected a version line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(
            path, 1, f"unsupported version {lines[0].strip()!r}, expected {CHECKPOINT_VERSION}"
        )
    if len(lines) < 2:
        raise CorruptCheckpointError(path, 2, "missing entry count line")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CorruptCheckpointError(path, 2, f"malformed entry count {lines[1]!r}") from None
    if count < 0:
        raise CorruptCheckpointError(path, 2, f"negative entry count {count}")
    entries = lines[2:]
    if len(entries) != count:
        raise CorruptCheckpointError(
            path,
            2 + min(len(entries), count) + 1,
            f"count line says {count} entries, found {len(entries)}",
        )
    parsed: list[list[str]] = []
    for index, line in enumerate(entries):
        tokens = line.split()
        if len(tokens) != fields:
            raise CorruptCheckpointError(
                path, index + 3, f"expected {fields} fields, got {len(tokens)}: {line!r}"
            )
        parsed.append(tokens)
    return parsed


def _int(path: str, line: int, token: str, what: str) -> int:
    try:
        value = int(token)
    except ValueError:
        raise CorruptCheckpointError(path, line, f"{what} {token!r} is not an integer") from None
    return value


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoint (HW, recovery point, log start offset)."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]) -> None:
        items = sorted(offsets.items())
        lines = [str(CHECKPOINT_VERSION), str(len(items))]
        for (topic, partition), offset in items:
            if not topic or any(ch.isspace() for ch in topic):
                raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint")
            lines.append(f"{topic} {partition} {offset}")
        _write_atomically(self.fs, self.path, "\n".join(lines) + "\n")

    def read(self) -> dict[TopicPartition, int]:
        """Entries of the file; {} if it does not exist. Raises CorruptCheckpointError."""
        if not self.fs.exists(self.path):
            return {}
        result: dict[TopicPartition, int] = {}
        for index, (topic, partition, offset) in enumerate(_read_lines(self.fs, self.path, 3)):
            line = index + 3
            key = TopicPartition(topic, _int(self.path, line, partition, "partition"))
            if key.partition < 0:
                raise CorruptCheckpointError(self.path, line, f"negative partition {partition}")
            if key in result:
                raise CorruptCheckpointError(self.path, line, f"duplicate entry for {key}")
            result[key] = _int(self.path, line, offset, "offset")
        return result


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` checkpoint of one partition's leader epoch cache."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path

    def write(self, entries: Iterable[EpochEntry], *, sync_dir: bool = True) -> None:
        """Replace the file atomically. ``sync_dir=False`` leaves the directory fsync (which
        makes the rename durable) to the caller, who must do it before relying on the file."""
        _write_atomically(self.fs, self.path, self.render(entries).decode("utf-8"),
                          sync_dir=sync_dir)

    @staticmethod
    def render(entries: Iterable[EpochEntry]) -> bytes:
        """The file's contents for ``entries``."""
        items = list(entries)
        lines = [str(CHECKPOINT_VERSION), str(len(items))]
        lines.extend(f"{e.epoch} {e.start_offset}" for e in items)
        return ("\n".join(lines) + "\n").encode("utf-8")

    def read(self) -> list[EpochEntry]:
        """Entries in file order; [] if the file does not exist. Raises CorruptCheckpointError
        also when epochs or start offsets are negative or not increasing."""
        if not self.fs.exists(self.path):
            return []
        entries: list[EpochEntry] = []
        for index, (epoch_token, offset_token) in enumerate(_read_lines(self.fs, self.path, 2)):
            line = index + 3
            entry = EpochEntry(
                _int(self.path, line, epoch_token, "epoch"),
                _int(self.path, line, offset_token, "start offset"),
            )
            if entry.epoch < 0 or entry.start_offset < 0:
                raise CorruptCheckpointError(self.path, line, f"negative value in {entry}")
            if entries and (
                entry.epoch <= entries[-1].epoch or entry.start_offset < entries[-1].start_offset
            ):
                raise CorruptCheckpointError(
                    self.path, line, f"entries not increasing: {entries[-1]} then {entry}"
                )
            entries.append(entry)
        return entries


def clamp_high_watermark(
    checkpointed: int | None, log_start_offset: int, log_end_offset: int
) -> int:
    """Kafka's load rule: ``hw = clamp(checkpoint or 0, logStartOffset, LEO)``."""
    value = 0 if checkpointed is None else checkpointed
    return max(log_start_offset, min(value, log_end_offset))
