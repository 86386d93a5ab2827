"""Where a share partition's state (``partition.ShareState``) is kept between a leader's
restarts: one small text file per (group, topic id, partition) under the data directory,

    <data_dir>/share-group-state/<topic_id>-<partition>/<group id, hex>

written the checkpoints' way (temp file, fsync, rename, fsync the directory) before the
ShareFetch or ShareAcknowledge that changed it is answered. The format, one item per line::

    0                                  (version)
    <state_epoch> <start_offset> <end_offset> <leader_epoch it was written at>
    <count of batches>
    <first_offset> <last_offset> <state> <delivery_count>   (one line per batch)

A file that does not parse is logged (one line) and treated as absent: the partition starts
over by ``share.auto.offset.reset``. Kafka keeps this state in ``__share_group_state`` via
Read/WriteShareGroupState; this store survives a restart of the leader but not the loss of its
disk nor a leader failover (docs/wire.md).
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from dataclasses import dataclass
from pathlib import Path

from floodmark.broker.share_group.partition import RecordState, ShareState, StateBatch
from floodmark.storage.checkpoints import write_text_atomically
from floodmark.storage.fs import FileSystem

log = logging.getLogger(__name__)
VERSION = 0
DIRECTORY = "share-group-state"


@dataclass(frozen=True, slots=True)
class Stored:
    state: ShareState
    leader_epoch: int  # the partition's leader epoch when it was written


def encode(state: ShareState, leader_epoch: int) -> str:
    lines = [str(VERSION),
             f"{state.state_epoch} {state.start_offset} {state.end_offset} {leader_epoch}",
             str(len(state.batches))]
    lines += [f"{b.first_offset} {b.last_offset} {int(b.state)} {b.delivery_count}"
              for b in state.batches]
    return "\n".join(lines) + "\n"


def decode(text: str) -> Stored:
    """The state in ``text``; ValueError when it is not one."""
    lines = text.splitlines()
    if len(lines) < 3 or lines[0] != str(VERSION):
        raise ValueError("not a version-0 share state")
    epoch, start, end, leader_epoch = (int(x) for x in lines[1].split())
    count = int(lines[2])
    if count != len(lines) - 3 or not 0 <= start <= end:
        raise ValueError("batch count or offsets do not add up")
    batches = []
    for line in lines[3:]:
        first, last, state, delivered = (int(x) for x in line.split())
        if not start <= first <= last < end or delivered < 0:
            raise ValueError(f"batch {line!r} outside [{start}, {end})")
        batches.append(StateBatch(first, last, RecordState(state), delivered))
    return Stored(ShareState(start, end, tuple(batches), epoch), leader_epoch)


class ShareStateStore:
    def __init__(self, fs: FileSystem, data_dir: Path) -> None:
        self.fs = fs
        self.root = str(data_dir / DIRECTORY)

    def _path(self, group_id: str, topic_id: uuid.UUID, partition: int) -> str:
        return posixpath.join(self.root, f"{topic_id}-{partition}",
                              group_id.encode("utf-8").hex() or "-")

    def load(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Stored | None:
        path = self._path(group_id, topic_id, partition)
        if not self.fs.exists(path):
            return None
        try:
            return decode(self.fs.read_file(path).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            log.error("share group %s partition %s-%d: stored state %s unreadable (%s): it "
                      "starts over by share.auto.offset.reset", group_id, topic_id, partition,
                      path, exc)
            return None

    def save(self, group_id: str, topic_id: uuid.UUID, partition: int,
             state: ShareState, leader_epoch: int) -> None:
        path = self._path(group_id, topic_id, partition)
        self.fs.mkdirs(posixpath.dirname(path))
        write_text_atomically(self.fs, path, encode(state, leader_epoch))

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        path = self._path(group_id, topic_id, partition)
        if self.fs.exists(path):
            self.fs.remove(path)

    def stored(self) -> list[tuple[str, uuid.UUID, int]]:
        """Every (group, topic id, partition) with a stored state."""
        out: list[tuple[str, uuid.UUID, int]] = []
        if not self.fs.exists(self.root):
            return out
        for name in self.fs.listdir(self.root):
            topic, _, part = name.rpartition("-")
            try:
                topic_id, index = uuid.UUID(topic), int(part)
            except ValueError:
                continue
            for group_hex in self.fs.listdir(posixpath.join(self.root, name)):
                if group_hex.endswith(".tmp"):
                    continue
                try:
                    group = "" if group_hex == "-" else bytes.fromhex(group_hex).decode()
                except ValueError:
                    continue
                out.append((group, topic_id, index))
        return out
