"""The consumer-group workload's clients (``--workload group``): members of one group.

``group-member`` — a confluent-kafka consumer of group ``--group`` subscribed to every topic:
with ``--group-protocol classic`` the classic protocol and the eager ``roundrobin`` assignor;
with ``consumer`` KIP-848's protocol, where the broker assigns and partitions come and go one
by one (incremental assignment). Under KIP-848 the generation in librdkafka's metadata is the
member's own epoch, which says nothing across members: it is written as ``member_epoch`` and
``generation`` stays None (the checker's ``split_ownership`` is a classic-protocol rule), and
each increment or revocation of the assignment closes the member's span and opens one with what
it owns then. Each poll's records are
"processed" (written to the history, then a pause of up to ``--process-ms``), then their next
offsets are committed explicitly: synchronously or asynchronously, chosen at random per poll
(``--async-commit-p``). The member lives until SIGTERM (it closes: revoke, LeaveGroup) or
SIGKILL; the nemesis's member faults end members and start new ones, so each process is one
member's life.

A watchdog (``faulthandler``): when the member's loop (a poll, its callbacks, a commit) or its
close makes no progress for ``STALL_S``, the Python stacks of every thread go to its log
(``Timeout (0:00:20)!`` and the frames, again every ``STALL_S`` while it lasts), so a member
stuck inside librdkafka says where (the run lists them: ``member_stalls``).

``FLOODMARK_CHAOS_GROUP_REWIND=1`` is a drill for the checker: members start every assignment
at the beginning of its partitions, past what the group committed.

``group-offsets`` — after the run: the group's committed offsets of every partition
(OffsetFetch through a consumer of the group that never joins), one ``committed`` line.

History lines (``floodmark.chaos.history``; ``group_checker`` reads them): ``subscribe``;
``rebalance`` ``ok`` with ``generation`` (from librdkafka's consumer group metadata),
``member`` and ``assigned``; ``revoke`` / ``lost`` with the partitions; ``poll`` with
``group``, ``generation``; ``commit`` ``invoke`` (``id``, ``mode``, ``offsets``,
``generation``) and its outcome: ``ok``, ``fail`` when the coordinator refused it (a fenced
generation or member, a rebalance in progress), ``info`` otherwise; ``leave`` when it closed.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import random
import struct
import sys
import time
from collections.abc import Mapping
from typing import Any

from floodmark.chaos.history import HistoryWriter
from floodmark.chaos.worker_config import confluent_config as _confluent_config
from floodmark.chaos.worker_config import records_confluent as _records_confluent
from floodmark.chaos.worker_config import topics_of as _topics

GROUP_METADATA_MAGIC = b"CGMDv2:"
# The coordinator answered: the commit definitely did not happen.
REFUSALS = frozenset({"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS",
                      "FENCED_INSTANCE_ID", "STALE_MEMBER_EPOCH"})
COMMITTED_ATTEMPTS = 20
# Settings KIP-848's members may not set (librdkafka refuses or ignores them there).
CLASSIC_ONLY = frozenset({"session.timeout.ms", "heartbeat.interval.ms",
                          "partition.assignment.strategy"})
# A drill for the checker, never on by default: every assignment starts at the beginning of its
# partitions instead of the committed offsets (what issue 22's new coordinator did to a Quix
# application), so ``rewound`` and ``redelivered`` must be reported.
REWIND_ENV = "FLOODMARK_CHAOS_GROUP_REWIND"
# No progress for this long (a poll with its callbacks, a commit, the close): the member's
# stacks go to its log. Well above a synchronous commit's wait on a failing coordinator.
STALL_S = 20.0


def generation_of(metadata: Any) -> int | None:
    """The generation id in librdkafka's serialized consumer group metadata
    (``rd_kafka_consumer_group_metadata_write``: ``CGMDv2:``, then the generation as a
    native-endian int32); None for anything else."""
    if not isinstance(metadata, bytes) or not metadata.startswith(GROUP_METADATA_MAGIC):
        return None
    start = len(GROUP_METADATA_MAGIC)
    if len(metadata) < start + 4:
        return None
    return int(struct.unpack_from("=i", metadata, start)[0])


def _error_name(exc: Exception) -> str:
    err = exc.args[0] if exc.args else None
    return str(err.name()) if err is not None and hasattr(err, "name") else type(exc).__name__


def group_member(args: argparse.Namespace, history: HistoryWriter, stop: Mapping[str, bool]
                 ) -> int:
    """``stop``: the worker's flag its SIGTERM handler sets (``workload.STOP`` of the module
    run as ``__main__``, not a second import's)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    topics = sorted({t for t, _p in _topics(args.topics)})
    rewind = os.environ.get(REWIND_ENV) == "1"
    rng = random.Random(f"{args.seed}:{args.process}")
    deadline = time.monotonic() + args.duration_s
    pending: dict[tuple[tuple[str, int, int], ...], list[int]] = {}  # async offsets -> ids
    group = args.group

    incremental = args.group_protocol == "consumer"

    def where(consumer: Any) -> dict[str, Any]:
        try:
            generation = generation_of(consumer.consumer_group_metadata())
        except Exception:  # not in a group (yet)
            generation = None
        if incremental:
            return {"group": group, "generation": None, "member_epoch": generation}
        return {"group": group, "generation": generation}

    def on_commit(err: Any, partitions: list[Any]) -> None:
        """Asynchronous commits' outcomes (librdkafka calls this for those only)."""
        offsets = [[tp.topic, tp.partition, tp.offset] for tp in partitions]
        ids = pending.get(tuple(sorted((t, p, o) for t, p, o in offsets)), [])
        cid = ids.pop(0) if ids else None
        errors = [tp.error for tp in partitions if tp.error is not None]
        if err is None and not errors:
            history.event("ok", "commit", group=group, id=cid, mode="async", offsets=offsets)
            return
        first = err if err is not None else errors[0]
        name = str(first.name()) if hasattr(first, "name") else str(first)
        history.event("fail" if name in REFUSALS else "info", "commit", group=group, id=cid,
                      mode="async", offsets=offsets, error=name)

    if incremental:  # (KIP-848: the assignor, session and heartbeat are the broker's)
        settings = {k: v for k, v in _confluent_config(args, group).items()
                    if k not in CLASSIC_ONLY}
        consumer = Consumer({**settings, "group.protocol": "consumer", "on_commit": on_commit})
    else:
        # (roundrobin: every member has partitions to own; range would leave the third of
        # three members idle on topics of two partitions)
        consumer = Consumer({**_confluent_config(args, group), "on_commit": on_commit,
                             "partition.assignment.strategy": "roundrobin"})

    def owned(c: Any) -> list[list[Any]]:
        return sorted([tp.topic, tp.partition] for tp in c.assignment())

    def on_assign(c: Any, partitions: list[Any]) -> None:
        start = OFFSET_BEGINNING if rewind else None
        chosen = [TopicPartition(tp.topic, tp.partition, start) if start is not None else tp
                  for tp in partitions]
        if incremental:
            if not partitions:
                return  # (librdkafka's empty increment after a revocation: nothing new)
            c.incremental_assign(chosen)
            history.event("ok", "rebalance", member=c.memberid(), assigned=owned(c),
                          added=[[tp.topic, tp.partition] for tp in partitions], **where(c))
            return
        history.event("ok", "rebalance", member=c.memberid(),
                      assigned=[[tp.topic, tp.partition] for tp in partitions], **where(c))
        if rewind:  # the checker's own drill: a consumer moved back past what was committed
            c.assign(chosen)

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        history.event("ok", "revoke", partitions=[[tp.topic, tp.partition] for tp in partitions],
                      **where(c))
        if incremental:
            c.incremental_unassign(partitions)
            if c.assignment():  # what it keeps: a new span (its positions go on)
                history.event("ok", "rebalance", member=c.memberid(), assigned=owned(c),
                              added=[], **where(c))

    def on_lost(c: Any, partitions: list[Any]) -> None:
        history.event("ok", "lost", partitions=[[tp.topic, tp.partition] for tp in partitions],
                      **where(c))
        if incremental:
            c.incremental_unassign(partitions)

    consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    history.event("ok", "subscribe", group=group, topics=topics,
                  protocol=args.group_protocol)
    n = 0
    try:
        while not stop["now"] and time.monotonic() < deadline:
            faulthandler.dump_traceback_later(STALL_S, repeat=True, file=sys.stderr)
            records = _records_confluent(consumer.consume(100, 0.5))
            if not records:
                continue
            context = where(consumer)
            history.event("ok", "poll", records=records, **context)
            if args.process_ms > 0:
                time.sleep(rng.uniform(0, args.process_ms) / 1000)
            following: dict[tuple[str, int], int] = {}
            for topic, partition, offset, _v in records:
                following[(topic, partition)] = max(following.get((topic, partition), 0),
                                                    offset + 1)
            chosen = [(t, p, o) for (t, p), o in sorted(following.items())]
            offsets = [[t, p, o] for t, p, o in chosen]
            cid, n = n, n + 1
            mode = "async" if rng.random() < args.async_commit_p else "sync"
            history.event("invoke", "commit", id=cid, mode=mode, offsets=offsets, **context)
            tps = [TopicPartition(t, p, o) for t, p, o in chosen]
            if mode == "async":
                pending.setdefault(tuple(chosen), []).append(cid)
                try:
                    consumer.commit(offsets=tps, asynchronous=True)
                except KafkaException as exc:
                    history.event("fail", "commit", group=group, id=cid, mode=mode,
                                  error=_error_name(exc))
                continue
            try:
                done = consumer.commit(offsets=tps, asynchronous=False) or []
            except KafkaException as exc:
                name = _error_name(exc)
                history.event("fail" if name in REFUSALS else "info", "commit", group=group,
                              id=cid, mode=mode, error=name)
                continue
            errors = [tp.error for tp in done if tp.error is not None]
            if errors:
                name = str(errors[0].name()) if hasattr(errors[0], "name") else str(errors[0])
                history.event("fail" if name in REFUSALS else "info", "commit", group=group,
                              id=cid, mode=mode, error=name)
            else:
                history.event("ok", "commit", group=group, id=cid, mode=mode,
                              offsets=[[tp.topic, tp.partition, tp.offset] for tp in done])
    finally:
        # (close serves the revoke callback, waits for outstanding commits and leaves the group)
        faulthandler.dump_traceback_later(STALL_S, repeat=True, file=sys.stderr)
        try:
            consumer.close()
            history.event("info", "leave", group=group)
        except Exception as exc:
            history.event("info", "leave", group=group, error=type(exc).__name__)
        finally:
            faulthandler.cancel_dump_traceback_later()
    return 0


def group_offsets(args: argparse.Namespace, history: HistoryWriter, stop: Mapping[str, bool]
                  ) -> int:
    """The group's committed offsets of every partition, asked again (bounded) while the
    coordinator is not ready."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    keys = _topics(args.topics)
    consumer = Consumer(_confluent_config(args, args.group))
    try:
        deadline = time.monotonic() + args.duration_s
        last_error = ""
        for _attempt in range(COMMITTED_ATTEMPTS):
            if stop["now"] or time.monotonic() >= deadline:
                break
            try:
                done = consumer.committed([TopicPartition(t, p) for t, p in keys], timeout=10)
            except KafkaException as exc:
                last_error = _error_name(exc)
                time.sleep(0.5)
                continue
            if any(tp.error is not None for tp in done):
                last_error = str(next(tp.error for tp in done if tp.error is not None))
                time.sleep(0.5)
                continue
            history.event("ok", "committed", group=args.group,
                          offsets=[[tp.topic, tp.partition, tp.offset] for tp in done])
            return 0
        history.event("info", "committed", group=args.group, error=last_error)
        return 1
    finally:
        consumer.close()
