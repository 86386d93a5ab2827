"""The data directory's clean-shutdown marker (Kafka's ``.kafka_cleanshutdown``).

Written, durably, after every log of the directory was flushed and closed and the recovery-point
checkpoint was written; removed, durably, when the directory is opened again, before any log
accepts a write. Its presence therefore means: every byte of every log is on disk and the
checkpointed recovery points equal the log end offsets. ``Log.open(..., clean_shutdown=True)``
uses that to skip fsyncing data it would otherwise have to treat as possibly unsynced (a stale
recovery-point checkpoint after a truncation cannot be told apart from a flushed log otherwise).
"""

from __future__ import annotations

from floodmark.storage.fs import FileSystem

CLEAN_SHUTDOWN_FILE = ".floodmark-clean-shutdown"


def write_clean_shutdown_marker(fs: FileSystem, data_dir: str) -> None:
    """Call only after every log in ``data_dir`` was flushed and closed and the checkpoints
    were written."""
    handle = fs.open(f"{data_dir}/{CLEAN_SHUTDOWN_FILE}")
    try:
        handle.fsync()
    finally:
        handle.close()
    fs.fsync_dir(data_dir)


def consume_clean_shutdown_marker(fs: FileSystem, data_dir: str) -> bool:
    """True if the last shutdown of ``data_dir`` was clean. The marker is removed (durably)
    either way, so a crash from now on is seen as unclean by the next start."""
    path = f"{data_dir}/{CLEAN_SHUTDOWN_FILE}"
    if not fs.exists(path):
        return False
    fs.remove(path)
    fs.fsync_dir(data_dir)
    return True


__all__ = ["CLEAN_SHUTDOWN_FILE", "consume_clean_shutdown_marker", "write_clean_shutdown_marker"]
