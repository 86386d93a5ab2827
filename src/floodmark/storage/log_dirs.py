"""Several log directories per broker (Kafka's ``log.dirs``, KIP-112 / KIP-858): the rules.

* ``parse_log_dirs``: the comma-separated list, each directory once.
* ``choose_log_dir``: where a new replica goes: the directory with the most usable bytes, ties
  broken by the fewest partitions, then by the order of ``log.dirs`` (Kafka places by partition
  count alone; free space first keeps a nearly full disk from taking the next replica).
* ``scan_log_dirs``: where each partition is on start. A partition found in two directories is
  an error naming both (``DuplicatePartitionError``), never a guess. Leftovers of a move
  (``AlterReplicaLogDirs``, ``<topic>-<partition>.<id>-future`` / ``-delete``) are settled first
  so that exactly one copy is live: a ``-future`` copy is dropped (the move did not finish);
  a ``-delete`` copy is dropped if a live copy exists anywhere, else it becomes live again (the
  move stopped between its two renames).
* ``load_or_create_directory_id``: each directory's ``meta.properties`` with its
  ``directory.id`` (KIP-858), made once and never changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from floodmark.errors import FloodmarkError
from floodmark.storage.checkpoints import TopicPartition, write_text_atomically
from floodmark.storage.fs import FileSystem
from floodmark.storage.log import parse_partition_dir

META_PROPERTIES = "meta.properties"
DIRECTORY_ID_KEY = "directory.id"
FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"


class DuplicatePartitionError(FloodmarkError, ValueError):
    """A partition directory in two log directories. ``str()`` is the one-line message."""


class BadMetaPropertiesError(FloodmarkError, ValueError):
    pass


def parse_log_dirs(value: str | None) -> list[str]:
    """``log.dirs`` as a list (blank entries dropped, each directory once, order kept)."""
    out: list[str] = []
    for item in (value or "").split(","):
        path = item.strip().rstrip("/") or ("/" if item.strip() else "")
        if path and path not in out:
            out.append(path)
    return out


@dataclass(frozen=True, slots=True)
class DirUsage:
    """What placement knows of one directory."""

    usable_bytes: int
    partitions: int


def choose_log_dir(dirs: Sequence[DirUsage]) -> int:
    """The index of the directory a new replica goes to (see the module docstring)."""
    if not dirs:
        raise ValueError("no online log directory")
    return min(range(len(dirs)),
               key=lambda i: (-dirs[i].usable_bytes, dirs[i].partitions, i))


def move_name(tp: TopicPartition | tuple[str, int], move_id: str, suffix: str) -> str:
    """``<topic>-<partition>.<id><suffix>``: Kafka's names for a future or deleted copy."""
    topic, partition = tp
    return f"{topic}-{partition}.{move_id}{suffix}"


def parse_move_name(name: str) -> tuple[TopicPartition, str] | None:
    """(partition, suffix) of a ``-future`` or ``-delete`` directory name, else None."""
    for suffix in (FUTURE_SUFFIX, DELETE_SUFFIX):
        if name.endswith(suffix):
            base, dot, move_id = name[: -len(suffix)].rpartition(".")
            tp = parse_partition_dir(base) if dot and move_id else None
            if tp is not None:
                return tp, suffix
    return None


def scan_log_dirs(fs: FileSystem, dirs: Sequence[str]) -> dict[TopicPartition, str]:
    """Every partition directory in ``dirs`` -> the log directory holding it (leftovers of a
    move settled first, see the module docstring)."""
    found: dict[TopicPartition, str] = {}
    deleted: list[tuple[TopicPartition, str, str]] = []  # (partition, log dir, name)
    for log_dir in dirs:
        for name in sorted(fs.listdir(log_dir)):
            path = f"{log_dir}/{name}"
            if not fs.is_dir(path):
                continue
            moved = parse_move_name(name)
            if moved is not None:
                if moved[1] == FUTURE_SUFFIX:
                    fs.rmtree(path)
                else:
                    deleted.append((moved[0], log_dir, name))
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            if tp in found:
                raise DuplicatePartitionError(
                    f"partition {tp} is in two log directories: {found[tp]}/{name} and "
                    f"{path}; remove the stale copy and start again")
            found[tp] = log_dir
    for tp, log_dir, name in deleted:
        if tp in found:
            fs.rmtree(f"{log_dir}/{name}")
        else:  # the move stopped between its renames: the source is the live copy again
            fs.rename(f"{log_dir}/{name}", f"{log_dir}/{tp}")
            fs.fsync_dir(log_dir)
            found[tp] = log_dir
    return found


def new_directory_id() -> str:
    return str(uuid.uuid4())


def load_or_create_directory_id(fs: FileSystem, path: str,
                                new_id: Callable[[], str] = new_directory_id) -> str:
    """The directory's ``directory.id`` from its ``meta.properties``, written (durably) first if
    the directory has none. A ``meta.properties`` without one is refused. (A controller's data
    dir keeps its id the same way: ``controller.quorum.directory_id``.)"""
    file_path = f"{path.rstrip('/')}/{META_PROPERTIES}"
    if fs.exists(file_path):
        try:
            text = fs.read_file(file_path).decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == DIRECTORY_ID_KEY and value.strip():
                return value.strip()
        raise BadMetaPropertiesError(f"{file_path} has no {DIRECTORY_ID_KEY}; refusing to "
                                     "start as a new directory over an existing one")
    directory_id = new_id()
    write_text_atomically(fs, file_path, f"{DIRECTORY_ID_KEY}={directory_id}\nversion=1\n")
    return directory_id
