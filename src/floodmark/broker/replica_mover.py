"""Moving a replica between this broker's log directories while it serves (AlterReplicaLogDirs,
KIP-113), as Kafka does it: a ``-future`` copy in the destination catches up, then is swapped in.

floodmark's copy is made by copying files rather than by a local fetcher: rounds on a worker
thread while the partition keeps serving produce and fetch (``storage.replica_move.sync_copy``;
each round copies only what changed since the previous one), until a round copies little; then,
on the event loop (so no append interleaves), the log is flushed, the last changes are copied
and fsynced, the log is closed and the copy reopened in its place (``Storage.finish_move``), all
without yielding. Clients see at most a pause of that last round; nothing is refused.

A move stops (the copy is removed, the replica stays where it was) if the partition leaves this
broker meanwhile, or on an I/O error (one line in the log).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time

from floodmark.broker.context import BrokerCore
from floodmark.broker.storage_glue import FutureReplica, LogDir
from floodmark.storage import fsync_tree, sync_copy

log = logging.getLogger(__name__)

# Stop the background rounds once one copies at most this much (the last round, on the event
# loop, copies what remains) or after this many rounds (a partition written faster than it can
# be copied still moves, with a longer last round).
CATCH_UP_BYTES = 1 << 20
MAX_BACKGROUND_ROUNDS = 20
_SEGMENT_FILE = re.compile(r"^(\d{20})\.")


def start_move(broker: BrokerCore, key: tuple[str, int], destination: LogDir
               ) -> asyncio.Task[None]:
    """Begin moving ``key``'s replica to ``destination`` (checked by the caller: hosted here,
    not already there or moving); the caller keeps the task (cancelled at shutdown: the
    ``-future`` copy left behind is removed at the next start)."""
    future = broker.storage.begin_move(key, destination)
    source = broker.storage.dir_of(*key)
    log.info("partition %s-%d: moving replica from log dir %s to %s (future copy %s)", *key,
             source.path if source is not None else "?", destination.path, future.path.name)
    return asyncio.get_running_loop().create_task(_move(broker, key, future))


def _always_copied(active_base_offset: int, names: list[str]) -> frozenset[str]:
    """Files that may change in place without their size or mtime telling: the active
    segment's (its indexes) and every non-segment file (checkpoints, partition.metadata)."""
    out = set()
    for name in names:
        m = _SEGMENT_FILE.match(name)
        if m is None or int(m.group(1)) >= active_base_offset:
            out.add(name)
    return frozenset(out)


async def _move(broker: BrokerCore, key: tuple[str, int], future: FutureReplica) -> None:
    storage = broker.storage
    t0 = time.monotonic()
    try:
        ps = broker.partitions.get(key)
        if ps is None:
            raise _Stopped("the partition left this broker")
        source = ps.log.path
        for _ in range(MAX_BACKGROUND_ROUNDS):
            generation = ps.log.truncation_generation
            log_end_offset = ps.log.log_end_offset
            copied = await asyncio.to_thread(sync_copy, source, str(future.path), future.copy,
                                             truncation_generation=generation)
            if broker.partitions.get(key) is not ps:
                raise _Stopped("the partition left this broker")
            if storage.moving.get(key) is not future:
                raise _Stopped("the destination failed")
            if ps.log.truncation_generation == generation:
                future.copied_log_end_offset = log_end_offset
            if copied <= CATCH_UP_BYTES:
                break
        # The last round, on the event loop: nothing appends until the swap is done.
        old = ps.log
        old.flush()
        always = _always_copied(old.active_segment.base_offset, os.listdir(source))
        last = sync_copy(source, str(future.path), future.copy,
                         truncation_generation=old.truncation_generation, always=always)
        fsync_tree(str(future.path))
        old.close()
        try:
            moved = storage.finish_move(key, old, broker.now_ms())
        except OSError:
            ps.replace_log(storage.reopen(old, broker.now_ms()), broker.now_ms())  # as it was
            raise
        ps.replace_log(moved, broker.now_ms())
        storage.write_checkpoints(broker.partitions)
        log.info("partition %s-%d: replica moved to log dir %s in %.2fs (%d bytes, last round "
                 "%d bytes) log_end_offset=%d", *key, future.destination.path,
                 time.monotonic() - t0, future.copy.copied_bytes, last, moved.log_end_offset)
    except _Stopped as exc:
        if storage.moving.get(key) is future:
            storage.abort_move(key)
        log.warning("partition %s-%d: move to log dir %s stopped: %s", *key,
                    future.destination.path, exc)
    except OSError as exc:
        if storage.moving.get(key) is future:
            storage.abort_move(key)
        log.error("partition %s-%d: move to log dir %s failed: %s", *key,
                  future.destination.path, exc)


class _Stopped(Exception):
    pass
