"""KIP-932's share-group APIs, translated between the wire and the share cores
(``broker/share_group``): ShareGroupHeartbeat and ShareGroupDescribe at the group's
coordinator; ShareFetch and ShareAcknowledge at each partition's leader (share sessions,
acknowledgements piggy-backed on ShareFetch); Describe/Alter/DeleteShareGroupOffsets at the
coordinator, for the partitions this broker leads.

Every API answers UNSUPPORTED_VERSION while ``group.share.enable`` is off (ApiVersions does not
advertise them then, as Kafka 4.1 does not while ``share.version`` is 0). A share partition's
state is written to its share coordinator (``__share_group_state``, replicated) before the
request that changed it is answered, so nothing acknowledged is delivered again and no
delivery beyond the limit follows a restart or a leader failover. A partition whose state is
not loaded here yet (a new leader reading it back) or could not be written is answered with
a retriable error (``state_error``), and its records are not handed out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.share_group.coordinator import (
    ShareGroup,
    ShareHeartbeat,
    ShareHeartbeatAnswer,
    TopicInfo,
    TopicPartition,
)
from floodmark.broker.share_group.driver import Change, ShareKey, share_topics
from floodmark.broker.share_group.partition import (
    Acknowledgement,
    AcknowledgeType,
    AcquireResult,
    SharePartition,
)
from floodmark.broker.share_group.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from floodmark.errors import ErrorCode
from floodmark.groups import routing as group_routing
from floodmark.records import iter_batches
from floodmark.replication import AbortedTxn, FetchIsolation, read_for_fetch
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

log = logging.getLogger(__name__)
MAX_WAIT_MS = 30_000  # a ShareFetch waits at most this long for records
MAX_RECORDS_CAP = 10_000
DISABLED = "share groups are off on this broker (group.share.enable=false)"


def topics_view(ctx: HandlerContext) -> dict[str, TopicInfo]:
    return share_topics(ctx.controller.topics())


def _names_by_id(ctx: HandlerContext) -> dict[uuid.UUID, str]:
    return {meta.topic_id: name for name, meta in ctx.controller.topics().items()}


def _wire_partitions(parts: Iterable[tuple[uuid.UUID, int]],
                     names: dict[uuid.UUID, str] | None = None) -> list[WireResponse]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in parts:
        by_topic.setdefault(topic_id, []).append(p)
    out: list[WireResponse] = []
    for t, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0])):
        entry: WireResponse = {"topic_id": t, "partitions": sorted(ps)}
        if names is not None:
            entry["topic_name"] = names.get(t, "")
        out.append(entry)
    return out


# -- the coordinator -------------------------------------------------------------------------
def share_group_heartbeat(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                          conn: ClientConnection) -> HandlerResult:
    return _heartbeat(ctx, header, req, conn)


async def _heartbeat(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                     conn: ClientConnection) -> WireResponse:
    groups = ctx.share_groups
    group_id, member_id, epoch = str(req.group_id), str(req.member_id or ""), int(
        req.member_epoch)
    interval_ms = groups.settings_of(group_id).group.heartbeat_interval_ms

    def refuse(err: ErrorCode, message: str | None = None) -> WireResponse:
        return {"throttle_time": 0, "error_code": int(err), "error_message": message,
                "member_id": member_id or None, "member_epoch": epoch,
                "heartbeat_interval": interval_ms, "assignment": None}

    if not groups.settings.enabled:
        return refuse(ErrorCode.UNSUPPORTED_VERSION, DISABLED)
    err = ctx.coordinator_error(group_id)
    if err is not ErrorCode.NONE:
        return refuse(err)
    if group_routing.share_group_conflict(ctx.consumer_groups, ctx.groups.groups, group_id):
        return refuse(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group")
    names = req.subscribed_topic_names
    hb = ShareHeartbeat(
        group_id, member_id, epoch, client_id=header.client_id or "",
        client_host="/" + conn.peer.rsplit(":", 1)[0], rack_id=req.rack_id,
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names))
    answers: list[ShareHeartbeatAnswer] = []
    initialize: list[TopicPartition] = []
    topics = topics_view(ctx)

    def beat() -> None:
        answers.append(groups.coordinator.heartbeat(hb, topics, ctx.now_ms()))
        if answers[0].error is ErrorCode.NONE and epoch != -1:
            # newly subscribed partitions become initializing in the same records
            initialize.extend(groups.coordinator.to_initialize(group_id, topics, ctx.now_ms()))

    stored = await groups.change(group_id, beat, topics, ctx.now_ms())
    ans = answers[0]
    if ans.error is not ErrorCode.NONE:
        log.info("share group %s member %s epoch %d: ShareGroupHeartbeat refused: %s (%s)",
                 group_id, member_id, epoch, ans.error.name, ans.message)
        return refuse(ans.error, ans.message)
    if stored is not ErrorCode.NONE:
        return refuse(stored)
    if epoch == -1:
        groups.save_later(groups.release_member(group_id, member_id))
    g = groups.coordinator.groups.get(group_id)
    if initialize and g is not None:
        groups.initialize_later(group_id, initialize, g.group_epoch, topics, ctx.now_ms)
    out: WireResponse = {"throttle_time": 0, "error_code": 0, "error_message": None,
                         "member_id": ans.member_id, "member_epoch": ans.member_epoch,
                         "heartbeat_interval": ans.heartbeat_interval_ms, "assignment": None}
    if ans.assignment is not None:
        out["assignment"] = {"topic_partitions": _wire_partitions(ans.assignment)}
    return out


async def expire_members(ctx: HandlerContext) -> None:
    """Members whose session timed out leave their groups (and their locks come back); the
    groups' records say so."""
    groups = ctx.share_groups
    for group_id in list(groups.coordinator.groups):
        gone: list[tuple[str, str]] = []

        def expire(group_id: str = group_id, gone: list[tuple[str, str]] = gone) -> None:
            gone.extend(groups.coordinator.expire(topics_view(ctx), ctx.now_ms(),
                                                  only=group_id))

        err = await groups.change(group_id, expire, topics_view(ctx), ctx.now_ms())
        if err is not ErrorCode.NONE:
            continue  # undone; retried at the next tick
        for _group, member_id in gone:
            log.info("share group %s: member %s session timed out, removed", group_id,
                     member_id)
            groups.save_later(groups.release_member(group_id, member_id))


def _describe_group(g: ShareGroup, names: dict[uuid.UUID, str]) -> WireResponse:
    return {"error_code": 0, "error_message": None, "group_id": g.group_id,
            "group_state": g.state.value, "group_epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "assignor_name": "simple",
            "authorized_operations": -(2**31),
            "members": [{"member_id": m.member_id, "rack_id": m.rack_id,
                         "member_epoch": m.member_epoch, "client_id": m.client_id,
                         "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed),
                         "assignment": {"topic_partitions": _wire_partitions(m.assignment,
                                                                             names)}}
                        for m in sorted(g.members.values(), key=lambda m: m.member_id)]}


def share_group_describe(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                         conn: ClientConnection) -> WireResponse:
    names = _names_by_id(ctx)
    out = []
    for group_id in req.group_ids:
        base: WireResponse = {"group_id": group_id, "group_state": "", "group_epoch": -1,
                              "assignment_epoch": -1, "assignor_name": "", "members": [],
                              "authorized_operations": -(2**31), "error_message": None}
        err = ErrorCode.UNSUPPORTED_VERSION if not ctx.share_groups.settings.enabled \
            else ctx.coordinator_error(group_id)
        g = ctx.share_groups.coordinator.groups.get(group_id)
        if err is ErrorCode.NONE and g is None:
            err = ErrorCode.GROUP_ID_NOT_FOUND
            base["error_message"] = f"Group {group_id} not found."
        if err is not ErrorCode.NONE or g is None:
            out.append({**base, "error_code": int(err)})
            continue
        out.append(_describe_group(g, names))
    return {"throttle_time": 0, "groups": out}


# -- the partition leader --------------------------------------------------------------------
TopicGate = Callable[[str], "ErrorCode | None"]


def _leader(ctx: HandlerContext, topic_id: uuid.UUID | None, index: int,
            names: dict[uuid.UUID, str], denied: TopicGate | None = None
            ) -> tuple[ErrorCode, PartitionState | None]:
    name = names.get(topic_id) if topic_id is not None else None
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID, None
    refusal = denied(name) if denied is not None else None
    if refusal is not None:
        return refusal, None
    ps = ctx.partitions.get((name, index))
    if ps is None:
        known = index < len(ctx.controller.topics()[name].partitions)
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER if known
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
    if not ps.core.is_leader or ctx.membership.steps_down(ps.core, ctx.now_ms()):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, ps
    return ErrorCode.NONE, ps


def _fetch_bound(ctx: HandlerContext, group_id: str, ps: PartitionState) -> int:
    """How far records are handed out: the high watermark, or the last stable offset
    (``share.isolation.level=read_committed``)."""
    return ps.last_stable_offset if ctx.share_groups.settings_of(group_id).read_committed \
        else ps.high_watermark


def _offset_no_older(ctx: HandlerContext, ps: PartitionState, duration_ms: int) -> int | None:
    """share.auto.offset.reset=by_duration: the first offset whose timestamp is at or after
    now minus ``duration_ms`` (ListOffsets' rule); None when no record is that recent."""
    found = ps.log.offset_for_timestamp(max(0, ctx.now_ms() - duration_ms))
    return None if found is None else found[0]


def state_error(err: ErrorCode) -> ErrorCode:
    """A partition's answer when its state could not be read or written at the share
    coordinator (Kafka's SharePartition mapping): the coordinator's troubles are
    COORDINATOR_NOT_AVAILABLE (retriable), a fenced leader NOT_LEADER_OR_FOLLOWER."""
    if err in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
               ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if err is ErrorCode.FENCED_LEADER_EPOCH:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if err is ErrorCode.FENCED_STATE_EPOCH:
        return ErrorCode.FENCED_STATE_EPOCH
    return ErrorCode.UNKNOWN_SERVER_ERROR


async def _share_partition(ctx: HandlerContext, key: ShareKey, ps: PartitionState
                           ) -> tuple[ErrorCode, SharePartition | None]:
    """The share partition at this leader, read back from its share coordinator first."""
    err, core = await ctx.share_groups.load(key, ps.leader_epoch, ps.log_start_offset,
                                            _fetch_bound(ctx, key[0], ps),
                                            lambda ms: _offset_no_older(ctx, ps, ms))
    return (ErrorCode.NONE, core) if core is not None else (state_error(err), None)


def _not_for_consumers(data: bytes | memoryview,
                       aborted: Iterable[AbortedTxn]) -> list[int]:
    """The offsets of ``data``'s batches a read_committed member never gets: control batches
    (transaction markers) and the batches of aborted transactions."""
    out: list[int] = []
    spans = list(aborted)
    for _position, h in iter_batches(data, validate=False):
        last = h.base_offset + h.last_offset_delta
        if h.is_control or (h.is_transactional and any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset
                <= a.last_offset for a in spans)):
            out.extend(range(h.base_offset, last + 1))
    return out


async def _persist(ctx: HandlerContext, changes: Iterable[Change]
                   ) -> dict[ShareKey, ErrorCode]:
    """Write the changed share partitions' state; the keys whose write failed, with the
    error to answer for them."""
    errors = await ctx.share_groups.save(changes)
    return {k: state_error(e) for k, e in errors.items() if e is not ErrorCode.NONE}


def _acknowledgements(batches: Iterable[WireRequest]) -> list[Acknowledgement] | None:
    out = []
    try:
        for b in batches:
            out.append(Acknowledgement(int(b.first_offset), int(b.last_offset),
                                       tuple(AcknowledgeType(int(t))
                                             for t in b.acknowledge_types)))
    except ValueError:
        return None
    return out


async def _acknowledge(ctx: HandlerContext, member_id: str, key: ShareKey,
                       batches: Iterable[WireRequest], names: dict[uuid.UUID, str],
                       changed: list[Change], denied: TopicGate | None
                       ) -> tuple[ErrorCode, str | None]:
    err, ps = _leader(ctx, key[1], key[2], names, denied)
    if err is not ErrorCode.NONE or ps is None:
        return err, None
    acks = _acknowledgements(batches)
    if acks is None:
        return ErrorCode.INVALID_REQUEST, "unknown acknowledge type"
    err, core = await _share_partition(ctx, key, ps)
    if core is None:
        return err, "the share partition's state is not loaded here yet"
    # A lock that ran out is gone before the acknowledgement is judged: the record is no
    # longer the member's (INVALID_RECORD_STATE, as Kafka's timer has released it by then).
    expired = core.expire_locks(ctx.now_ms())
    res = core.acknowledge(member_id, acks)
    if expired and not res.changed:
        changed.append((key, core))
        ctx.purgatory.wake((ps.topic, ps.partition))
    if res.changed:
        changed.append((key, core))
        ctx.purgatory.wake((ps.topic, ps.partition))  # released records: a waiting fetch
    return res.error, res.message


def _leader_entry(ps: PartitionState | None, node_id: int) -> WireResponse:
    if ps is None or not ps.core.is_leader:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": node_id, "leader_epoch": ps.leader_epoch}


def _node_endpoints(ctx: HandlerContext, conn: ClientConnection) -> list[WireResponse]:
    listener: str | None = getattr(conn, "listener_name", None)
    return [{"node_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in ctx.live_brokers(listener)]


def _session_error(err: ErrorCode, message: str | None,
                   **extra: object) -> WireResponse:
    return {"throttle_time": 0, "error_code": int(err), "error_message": message,
            "responses": [], "node_endpoints": [], **extra}


def share_fetch(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                conn: ClientConnection, denied: TopicGate | None = None) -> HandlerResult:
    """``denied``: the topics authorization refuses (answered with its error, not read)."""
    return _share_fetch(ctx, header, req, conn, denied)


async def _share_fetch(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                       conn: ClientConnection, denied: TopicGate | None) -> WireResponse:
    groups = ctx.share_groups
    group_id, member_id = str(req.group_id or ""), str(req.member_id or "")
    lock_ms = groups.settings_of(group_id).partition.record_lock_duration_ms
    if not groups.settings.enabled:
        return _session_error(ErrorCode.UNSUPPORTED_VERSION, DISABLED,
                              acquisition_lock_timeout=lock_ms)
    epoch = int(req.share_session_epoch)
    if not group_id or not member_id:
        return _session_error(ErrorCode.INVALID_REQUEST, "group id and member id needed",
                              acquisition_lock_timeout=lock_ms)
    has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    if epoch == INITIAL_EPOCH and has_acks:
        return _session_error(ErrorCode.INVALID_REQUEST,
                              "a new share session carries no acknowledgements",
                              acquisition_lock_timeout=lock_ms)
    started = groups.sessions.begin(group_id, member_id, epoch, ctx.now_ms())
    if started.error is not ErrorCode.NONE:
        return _session_error(started.error, started.message,
                              acquisition_lock_timeout=lock_ms)
    changed: list[Change] = []
    for closed in started.closed:
        changed += groups.close_session(closed)
    session = started.session
    names = _names_by_id(ctx)
    # acknowledgements first (KIP-932: piggy-backed on the fetch), one answer per partition
    ack_errors: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
    for t in req.topics:
        for p in t.partitions:
            if t.topic_id is None:
                continue
            tp = (t.topic_id, int(p.partition_index))
            if p.acknowledgement_batches:
                ack_errors[tp] = await _acknowledge(ctx, member_id, (group_id, *tp),
                                                    p.acknowledgement_batches, names, changed,
                                                    denied)
    if session is not None and epoch != FINAL_EPOCH:
        for t in req.topics:
            if t.topic_id is not None:
                session.partitions.update((t.topic_id, int(p.partition_index))
                                          for p in t.partitions)
        for f in req.forgotten_topics_data:
            if f.topic_id is not None:
                for index in f.partitions:
                    session.partitions.discard((f.topic_id, int(index)))
                    key = (group_id, f.topic_id, int(index))
                    loaded = groups.partitions.get(key)
                    if loaded is not None and loaded.core.release_member(member_id):
                        changed.append((key, loaded.core))
    if epoch == FINAL_EPOCH:
        if session is not None:
            changed += groups.close_session(session)
        _unsaved(ack_errors, {}, await _persist(ctx, changed))
        return {"throttle_time": 0, "error_code": 0, "acquisition_lock_timeout": lock_ms,
                "responses": _partition_answers(ctx, ack_errors, {}, names, denied),
                "node_endpoints": _node_endpoints(ctx, conn)}
    assert session is not None
    max_records = max(1, min(int(req.max_records), MAX_RECORDS_CAP))
    budget = max(1, int(req.max_bytes))
    fetched = await _acquire_all(ctx, session, max_records, budget, names, changed, denied)
    _unsaved(ack_errors, fetched, await _persist(ctx, changed))
    wait_ms = min(max(ms(req.max_wait), 0), MAX_WAIT_MS)
    if wait_ms > 0 and not ack_errors and not any(
            f.get("acquired_records") for f in fetched.values()):
        keys = [(names[t], p) for t, p in session.partitions if t in names]
        await ctx.purgatory.wait(keys, wait_ms)
        if groups.sessions.sessions.get((group_id, member_id)) is session:
            changed = []
            fetched = await _acquire_all(ctx, session, max_records, budget, names, changed,
                                         denied)
            _unsaved({}, fetched, await _persist(ctx, changed))
    return {"throttle_time": 0, "error_code": 0, "acquisition_lock_timeout": lock_ms,
            "responses": _partition_answers(ctx, ack_errors, fetched, names, denied),
            "node_endpoints": _node_endpoints(ctx, conn)}


def _unsaved(ack_errors: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]],
             fetched: dict[tuple[uuid.UUID, int], WireResponse],
             failed: dict[ShareKey, ErrorCode]) -> None:
    """The partitions whose state could not be written: their acknowledgements failed and
    their acquired records are not handed out (the share partition was dropped at this leader
    and is read back from the coordinator at its next use)."""
    for (_group, topic_id, index), err in failed.items():
        tp = (topic_id, index)
        if tp in ack_errors and ack_errors[tp][0] is ErrorCode.NONE:
            ack_errors[tp] = (err, "the acknowledgement could not be stored")
        entry = fetched.get(tp)
        if entry is not None:
            entry.update(error_code=int(err), records=b"", acquired_records=[])


async def _acquire_all(ctx: HandlerContext, session: ShareSession, max_records: int,
                       budget: int, names: dict[uuid.UUID, str], changed: list[Change],
                       denied: TopicGate | None) -> dict[tuple[uuid.UUID, int], WireResponse]:
    out: dict[tuple[uuid.UUID, int], WireResponse] = {}
    left = max_records
    for tp in sorted(session.partitions, key=lambda x: (str(x[0]), x[1])):
        key = (session.group_id, *tp)
        err, ps = _leader(ctx, tp[0], tp[1], names, denied)
        entry: WireResponse = {"partition_index": tp[1], "error_code": int(err),
                               "current_leader": _leader_entry(ps, ctx.node_id),
                               "records": b"", "acquired_records": []}
        out[tp] = entry
        if err is not ErrorCode.NONE or ps is None or left <= 0 or budget <= 0:
            continue
        err, core = await _share_partition(ctx, key, ps)
        if core is None:
            entry["error_code"] = int(err)
            continue
        if core.expire_locks(ctx.now_ms()):
            changed.append((key, core))
        committed = ctx.share_groups.settings_of(session.group_id).read_committed
        start = core.first_acquirable(_fetch_bound(ctx, key[0], ps))
        if start is None:
            continue
        read = read_for_fetch(ps.core, ps.log, start, -1,
                              FetchIsolation.TXN_COMMITTED if committed
                              else FetchIsolation.HIGH_WATERMARK, budget)
        if read.error is not ErrorCode.NONE:
            entry["error_code"] = int(read.error)
            continue
        if read.records is None or read.records.next_offset <= start:
            continue
        if committed and core.skip(_not_for_consumers(read.records.records,
                                                      read.aborted or ())):
            changed.append((key, core))
        data = read.records.records
        got = core.acquire(session.member_id, read.records.next_offset, left, ctx.now_ms())
        if not got.changed:
            continue
        got = _to_batch_end(core, session.member_id, got, data, ctx.now_ms())
        changed.append((key, core))
        entry["records"] = bytes(data)
        budget -= len(data)
        entry["acquired_records"] = [
            {"first_offset": a.first_offset, "last_offset": a.last_offset,
             "delivery_count": a.delivery_count} for a in got.acquired]
        left -= sum(a.last_offset - a.first_offset + 1 for a in got.acquired)
    return out


def _to_batch_end(core: SharePartition, member_id: str, got: AcquireResult,
                  data: bytes | memoryview, now_ms: int) -> AcquireResult:
    """ShareFetch's ``max_records`` is a soft limit at batch boundaries (KIP-932, Kafka's
    batch-optimized acquisition): when it cut a batch of ``data`` the rest of that batch is
    acquired too, so a batch larger than the limit comes whole, not split across polls."""
    last = got.acquired[-1].last_offset
    for _position, h in iter_batches(data, validate=False):
        batch_last = h.base_offset + h.last_offset_delta
        if h.base_offset <= last < batch_last:
            more = core.acquire(member_id, batch_last + 1, batch_last - last, now_ms)
            if not more.changed:
                break
            runs = list(got.acquired)
            for a in more.acquired:  # one range where they meet (as Kafka answers it)
                if runs[-1].last_offset + 1 == a.first_offset and \
                        runs[-1].delivery_count == a.delivery_count:
                    runs[-1] = replace(runs[-1], last_offset=a.last_offset)
                else:
                    runs.append(a)
            return AcquireResult(tuple(runs), True)
    return got


def _partition_answers(ctx: HandlerContext,
                       ack_errors: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]],
                       fetched: dict[tuple[uuid.UUID, int], WireResponse],
                       names: dict[uuid.UUID, str], denied: TopicGate | None
                       ) -> list[WireResponse]:
    by_topic: dict[uuid.UUID, list[WireResponse]] = {}
    for tp in sorted({*ack_errors, *fetched}, key=lambda x: (str(x[0]), x[1])):
        entry = fetched.get(tp)
        if entry is None:
            _err, ps = _leader(ctx, tp[0], tp[1], names)
            entry = {"partition_index": tp[1], "error_code": 0,
                     "current_leader": _leader_entry(ps, ctx.node_id), "records": b"",
                     "acquired_records": []}
        ack_err, ack_message = ack_errors.get(tp, (ErrorCode.NONE, None))
        entry = {**entry, "acknowledge_error_code": int(ack_err),
                 "acknowledge_error_message": ack_message}
        by_topic.setdefault(tp[0], []).append(entry)
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


def share_acknowledge(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                      conn: ClientConnection, denied: TopicGate | None = None
                      ) -> HandlerResult:
    return _share_acknowledge(ctx, req, conn, denied)


async def _share_acknowledge(ctx: HandlerContext, req: WireRequest, conn: ClientConnection,
                             denied: TopicGate | None) -> WireResponse:
    groups = ctx.share_groups
    if not groups.settings.enabled:
        return _session_error(ErrorCode.UNSUPPORTED_VERSION, DISABLED)
    group_id, member_id = str(req.group_id or ""), str(req.member_id or "")
    epoch = int(req.share_session_epoch)
    started = groups.sessions.begin(group_id, member_id, epoch, ctx.now_ms(),
                                    acknowledging_only=True)
    if started.error is not ErrorCode.NONE:
        return _session_error(started.error, started.message)
    names = _names_by_id(ctx)
    changed: list[Change] = []
    answers: dict[tuple[uuid.UUID, int], tuple[ErrorCode, str | None]] = {}
    for t in req.topics:
        if t.topic_id is None:
            continue
        for p in t.partitions:
            tp = (t.topic_id, int(p.partition_index))
            answers[tp] = await _acknowledge(ctx, member_id, (group_id, *tp),
                                             p.acknowledgement_batches, names, changed, denied)
    if epoch == FINAL_EPOCH and started.session is not None:
        changed += groups.close_session(started.session)
    _unsaved(answers, {}, await _persist(ctx, changed))
    by_topic: dict[uuid.UUID, list[WireResponse]] = {}
    for (topic_id, index), (err, message) in answers.items():
        _err, ps = _leader(ctx, topic_id, index, names)
        by_topic.setdefault(topic_id, []).append({
            "partition_index": index, "error_code": int(err), "error_message": message,
            "current_leader": _leader_entry(ps, ctx.node_id)})
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            "node_endpoints": _node_endpoints(ctx, conn)}


# -- the share-group offset APIs -------------------------------------------------------------
def _offsets_refusal(ctx: HandlerContext, group_id: str) -> ErrorCode:
    if not ctx.share_groups.settings.enabled:
        return ErrorCode.UNSUPPORTED_VERSION
    return ctx.coordinator_error(group_id)


def describe_share_group_offsets(ctx: HandlerContext, header: RequestHeader,
                                 req: WireRequest, conn: ClientConnection) -> HandlerResult:
    return _describe_share_group_offsets(ctx, req)


async def _describe_share_group_offsets(ctx: HandlerContext, req: WireRequest
                                        ) -> WireResponse:
    topics = ctx.controller.topics()
    out = []
    for g in req.groups:
        group_id = str(g.group_id)
        err = _offsets_refusal(ctx, group_id)
        if err is not ErrorCode.NONE:
            out.append({"group_id": group_id, "topics": [], "error_code": int(err)})
            continue
        wanted: list[tuple[str, list[int]]]
        if g.topics is None:  # every partition with a stored state of this group
            wanted = []
            for name in sorted(topics_view(ctx)):
                parts_of = topics[name].partitions
                found = await asyncio.gather(*(
                    ctx.share_groups.start_offset((group_id, topics[name].topic_id,
                                                   p.partition))
                    for p in parts_of))
                have = [p.partition for p, (_e, start) in zip(parts_of, found, strict=True)
                        if start >= 0]
                if have:
                    wanted.append((name, sorted(have)))
        else:
            wanted = [(str(t.topic_name), [int(p) for p in t.partitions]) for t in g.topics]
        answers = []
        for name, indexes in wanted:
            meta = topics.get(name)
            parts = []
            for index in indexes:
                entry: WireResponse = {"partition_index": index, "start_offset": -1,
                                       "leader_epoch": -1, "error_code": 0}
                if meta is None:
                    entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    serr, start = await ctx.share_groups.start_offset(
                        (group_id, meta.topic_id, index))
                    ps = ctx.partitions.get((name, index))
                    if serr is not ErrorCode.NONE:
                        entry["error_code"] = int(state_error(serr))
                    elif start >= 0:
                        entry["start_offset"] = start
                        entry["leader_epoch"] = ps.leader_epoch if ps is not None else -1
                parts.append(entry)
            answers.append({"topic_name": name,
                            "topic_id": meta.topic_id if meta is not None else None,
                            "partitions": parts})
        out.append({"group_id": group_id, "topics": answers, "error_code": 0})
    return {"throttle_time": 0, "groups": out}


def _change_refusal(ctx: HandlerContext, group_id: str) -> ErrorCode:
    """Alter and Delete ShareGroupOffsets: what ``_offsets_refusal`` refuses, and a group that
    still has members (NON_EMPTY_GROUP, as Kafka answers)."""
    err = _offsets_refusal(ctx, group_id)
    g = ctx.share_groups.coordinator.groups.get(group_id)
    if err is ErrorCode.NONE and g is not None and g.members:
        return ErrorCode.NON_EMPTY_GROUP
    return err


def alter_share_group_offsets(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                              conn: ClientConnection) -> HandlerResult:
    return _alter_share_group_offsets(ctx, req)


async def _alter_share_group_offsets(ctx: HandlerContext, req: WireRequest) -> WireResponse:
    group_id = str(req.group_id)
    err = _change_refusal(ctx, group_id)
    if err is not ErrorCode.NONE:
        return {"throttle_time": 0, "error_code": int(err), "responses": []}
    topics = ctx.controller.topics()
    names = _names_by_id(ctx)
    answers = []
    for t in req.topics:
        meta = topics.get(str(t.topic_name))
        parts = []
        for p in t.partitions:
            index, start = int(p.partition_index), int(p.start_offset)
            entry: WireResponse = {"partition_index": index, "error_code": 0}
            if meta is None:
                entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                perr, ps = _leader(ctx, meta.topic_id, index, names)
                if perr is not ErrorCode.NONE or ps is None:
                    entry["error_code"] = int(perr)
                elif not ps.log_start_offset <= start <= ps.high_watermark:
                    entry["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                else:
                    # stored by reset, before this answer
                    rerr = await ctx.share_groups.reset((group_id, meta.topic_id, index),
                                                        start, ps.leader_epoch)
                    entry["error_code"] = int(rerr if rerr is ErrorCode.NONE
                                              else state_error(rerr))
            parts.append(entry)
        answers.append({"topic_name": str(t.topic_name),
                        "topic_id": meta.topic_id if meta is not None else None,
                        "partitions": parts})
    return {"throttle_time": 0, "error_code": 0, "responses": answers}


def delete_share_group_offsets(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                               conn: ClientConnection) -> HandlerResult:
    return _delete_share_group_offsets(ctx, req)


async def _delete_share_group_offsets(ctx: HandlerContext, req: WireRequest) -> WireResponse:
    group_id = str(req.group_id)
    err = _change_refusal(ctx, group_id)
    if err is not ErrorCode.NONE:
        return {"throttle_time": 0, "error_code": int(err), "responses": []}
    topics = ctx.controller.topics()
    answers: list[WireResponse] = []
    for t in req.topics:
        name = str(t.topic_name)
        meta = topics.get(name)
        if meta is None:
            answers.append({"topic_name": name, "topic_id": None,
                            "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)})
            continue
        errors = await asyncio.gather(*(ctx.share_groups.forget((group_id, meta.topic_id, i))
                                        for i in range(len(meta.partitions))))
        err = next((e for e in errors if e is not ErrorCode.NONE), ErrorCode.NONE)
        if err is ErrorCode.NONE and group_id in ctx.share_groups.coordinator.groups:
            # the group's ShareGroupStatePartitionMetadata no longer names the topic
            coordinator = ctx.share_groups.coordinator
            err = await ctx.share_groups.change(
                group_id, partial(coordinator.state_deleted, group_id, [meta.topic_id]),
                topics_view(ctx), ctx.now_ms())
        answers.append({"topic_name": name, "topic_id": meta.topic_id,
                        "error_code": int(err if err is ErrorCode.NONE else state_error(err))})
    return {"throttle_time": 0, "error_code": 0, "responses": answers}


