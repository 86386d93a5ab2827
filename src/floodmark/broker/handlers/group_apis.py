"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete, served by the group's coordinator (FindCoordinator and
the refusals of other brokers are ``coordination``'s)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.errors import ErrorCode, KafkaError
from floodmark.groups import (
    CommittedOffset,
    ConsumerGroupCoordinator,
    GroupRecord,
    partition_for,
)
from floodmark.groups import records as cg_records
from floodmark.groups import routing as group_routing
from floodmark.metadata import OFFSETS_TOPIC
from floodmark.records import Record, build_batch
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext
    from floodmark.broker.partition_state import PartitionState

log = logging.getLogger(__name__)

CLASSIC = "classic"  # the group types of ListGroups v5: JoinGroup's groups
CONSUMER = "consumer"  # and KIP-848's (ConsumerGroupHeartbeat)
SHARE = "share"  # and KIP-932's (ShareGroupHeartbeat)


async def _join(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> WireResponse:
    version = header.api_version
    session_ms = ms(req.session_timeout)
    rebalance_ms = ms(getattr(req, "rebalance_timeout", None)) if version >= 1 else session_ms
    if rebalance_ms < 0:
        rebalance_ms = session_ms
    reason = getattr(req, "reason", None)  # v8+ (KIP-800): why the member (re)joins
    if reason:
        log.info("group %s: member %r joins: %r", req.group_id, req.member_id, reason[:200])
    res = await broker.groups.join(
        group_id=req.group_id, member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        client_id=header.client_id or "", client_host="/" + conn.peer.rsplit(":", 1)[0],
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=version >= 4,
    )
    return {
        "throttle_time": 0, "error_code": int(res.error), "generation_id": res.generation_id,
        "protocol_type": res.protocol_type,
        # null in an error answer (v7+ nullable), as Kafka sends it
        "protocol_name": res.protocol_name or (None if version >= 7 else ""),
        "leader": res.leader, "skip_assignment": False, "member_id": res.member_id,
        "members": [{"member_id": m, "group_instance_id": gi, "metadata": md}
                    for m, gi, md in res.members],
    }


def join_group(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    """A JoinGroup into a classic group, or into an empty consumer group (which gives way);
    a consumer group with members takes classic members (``classic_protocol``)."""
    if group_routing.join_group(broker.consumer_groups, req.group_id) is not \
            group_routing.Join.CLASSIC:
        return _join_after_empty_consumer_group(broker, header, req, conn)
    return _join(broker, header, req, conn)


async def _join_after_empty_consumer_group(broker: HandlerContext, header: RequestHeader,
                                           req: WireRequest,
                                           conn: ClientConnection) -> WireResponse:
    """An empty consumer group gives way to a classic one: its records become tombstones."""
    err = await change_consumer_group(
        broker, req.group_id, lambda: broker.consumer_groups.delete(req.group_id)[1])
    if err is not ErrorCode.NONE:
        return {"throttle_time": 0, "error_code": int(err), "generation_id": -1,
                "protocol_type": None, "protocol_name": None if header.api_version >= 7
                else "", "leader": "", "member_id": "", "members": []}
    return await _join(broker, header, req, conn)


async def _sync(broker: HandlerContext, header: RequestHeader, req: WireRequest) -> WireResponse:
    err, assignment, _ = await broker.groups.sync(
        group_id=req.group_id, member_id=req.member_id, generation_id=int(req.generation_id),
        assignments=[(a.member_id, bytes(a.assignment)) for a in req.assignments],
        group_instance_id=getattr(req, "group_instance_id", None),
    )
    # Kafka names the protocol only in a successful answer
    g = broker.groups.groups.get(req.group_id) if err == ErrorCode.NONE else None
    return {"throttle_time": 0, "error_code": int(err),
            "protocol_type": g.protocol_type if g else None,
            "protocol_name": g.protocol_name if g else None, "assignment": assignment}


def sync_group(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    return _sync(broker, header, req)


def heartbeat(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    err = broker.groups.heartbeat(req.group_id, req.member_id, int(req.generation_id),
                                  getattr(req, "group_instance_id", None))
    return {"throttle_time": 0, "error_code": int(err)}


def leave_group(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    if header.api_version >= 3:
        members = []
        for m in req.members:
            err = broker.groups.leave(req.group_id, m.member_id, m.group_instance_id)
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "error_code": int(err)})
        return {"throttle_time": 0, "error_code": 0, "members": members}
    err = broker.groups.leave(req.group_id, req.member_id)
    return {"throttle_time": 0, "error_code": int(err)}


# A commit that could not be replicated: the client finds the coordinator again and retries
# (Kafka's mapping of an offsets append error).
_REPLICATION_ERRORS = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
}
OFFSETS_ACKS_ALL_TIMEOUT_MS = 5000


def _append(broker: HandlerContext, group: str,
            batch: Callable[[int], bytes]) -> tuple[ErrorCode, PartitionState | None, int]:
    """Append ``batch(now_ms)`` to the group's ``__consumer_offsets`` partition; (error,
    partition, last offset appended)."""
    meta = broker.controller.topics()[OFFSETS_TOPIC]
    p = partition_for(group, len(meta.partitions))
    return _append_to(broker, OFFSETS_TOPIC, p, batch, f"the records of group {group}")


def _append_to(broker: HandlerContext, topic: str, p: int, batch: Callable[[int], bytes],
               what: str) -> tuple[ErrorCode, PartitionState | None, int]:
    """Append ``batch(now_ms)`` to internal partition ``topic-p`` as its leader, acks=all
    checked first (NOT_ENOUGH_REPLICAS below min ISR, mapped to a coordinator's error)."""
    ps = broker.partitions.get((topic, p))
    if ps is None or not ps.core.is_leader:
        return ErrorCode.NOT_COORDINATOR, None, -1
    refused = ps.core.check_produce(-1)  # acks=all: NOT_ENOUGH_REPLICAS below min ISR
    if refused is not ErrorCode.NONE:
        return _REPLICATION_ERRORS.get(refused, refused), None, -1
    now = broker.now_ms()
    try:
        info = ps.log.append_as_leader(batch(now), ps.leader_epoch, now)
    except KafkaError as exc:
        log.error("partition %s leader_epoch=%d: cannot store %s: %s",
                  ps.name, ps.leader_epoch, what, exc)
        return ErrorCode.UNKNOWN_SERVER_ERROR, None, -1
    return ErrorCode.NONE, ps, info.last_offset


async def _append_replicated(broker: HandlerContext, group: str,
                             batch: Callable[[int], bytes]) -> tuple[ErrorCode, int]:
    """Append to the group's offsets partition, answered once the HW passes the batch (Kafka's
    ``offsets.commit.required.acks=-1``: a coordinator failover cannot lose what was answered;
    ``tests/cluster/test_offset_commit_durability.py`` lost an acknowledged commit before);
    (error, last offset of the batch)."""
    return await _replicated(broker, _append(broker, group, batch))


async def append_record_replicated(broker: HandlerContext, topic: str, p: int, key: bytes,
                                   value: bytes | None) -> tuple[ErrorCode, int]:
    """Append one record (``value`` None: a tombstone) to internal partition ``topic-p``,
    answered once replicated to the ISR, as the offsets are (the share coordinator's
    ``__share_group_state``); (error, its offset)."""
    return await _replicated(broker, _append_to(
        broker, topic, p, lambda now: build_batch([Record(0, now, key, value)]),
        f"a record of {topic}"))


async def _replicated(broker: HandlerContext,
                      appended: tuple[ErrorCode, PartitionState | None, int]
                      ) -> tuple[ErrorCode, int]:
    err, ps, last = appended
    if ps is None:
        return err, -1
    produce_id = broker.next_produce_id()
    replicated = broker.park_produce(produce_id)
    now = broker.now_ms()
    ps.apply(ps.core.on_leader_append(ps.log, produce_id, -1, last, last, now,
                                      OFFSETS_ACKS_ALL_TIMEOUT_MS))
    error, _offset = await replicated
    return _REPLICATION_ERRORS.get(error, error), last


async def append_offsets_replicated(broker: HandlerContext, group: str,
                                    entries: list[tuple[str, int, CommittedOffset | None]],
                                    producer: tuple[int, int] | None = None) -> ErrorCode:
    """Store offsets in the group's ``__consumer_offsets`` partition; once replicated they are
    what OffsetFetch answers (never before: an offset that a failover could still lose is not
    handed to anyone). ``producer`` (id, epoch): a TxnOffsetCommit, appended as that producer's
    transactional batch and pending until its transaction's marker
    (``OffsetStore.on_transaction_marker``)."""
    err, last = await _append_replicated(
        broker, group, lambda now: broker.offsets.build_commit_batch(group, entries, now,
                                                                     producer))
    if err is ErrorCode.NONE:
        broker.offsets.apply_replicated(group, entries, last,
                                        producer[0] if producer is not None else None)
    return err


async def store_group(broker: HandlerContext, group: str,
                      record: GroupRecord | None) -> ErrorCode:
    """Store a group's metadata (None: a tombstone) in its offsets partition, answered once
    replicated: what a new coordinator loads after a failover."""
    err, _last = await _append_replicated(
        broker, group, lambda now: broker.offsets.build_group_batch(group, record, now))
    if err is ErrorCode.NONE:
        broker.offsets.store_group(group, record)
    return err


_CONSUMER_GROUP_LOCKS: weakref.WeakKeyDictionary[ConsumerGroupCoordinator,
                                                dict[str, asyncio.Lock]] = \
    weakref.WeakKeyDictionary()


def change_in_flight(broker: HandlerContext, group: str) -> asyncio.Lock | None:
    """The lock of ``group`` while a change of it is being stored (``change_consumer_group``),
    else None."""
    lock = _CONSUMER_GROUP_LOCKS.get(broker.consumer_groups, {}).get(group)
    return lock if lock is not None and lock.locked() else None


async def settled(broker: HandlerContext, group: str) -> None:
    """Wait until no change of ``group`` is being stored. A change is applied in memory before
    its records are stored and undone if the store fails (a coordinator that was paused and has
    not yet learnt it was replaced fails with NOT_COORDINATOR). Kafka's coordinator answers a
    request only once the records written before it are committed; a request that reads what
    kind of group this is waits here, so it never answers from a change that may be undone."""
    lock = change_in_flight(broker, group)
    while lock is not None:
        async with lock:
            pass
        lock = change_in_flight(broker, group)


async def change_consumer_group(
        broker: HandlerContext, group: str,
        change: Callable[[], Sequence[cg_records.ConsumerGroupRecord]],
        replaces_classic: GroupRecord | None = None) -> ErrorCode:
    """Run ``change`` (a call of the consumer-group core that returns the records it emitted)
    one at a time per group, and store its records; when they cannot be stored the group
    goes back to what it was before (so the core never runs ahead of its log), and the error
    is returned.

    KIP-848's migration, in the same batch (``group_routing.change``, the rule the simulator
    runs too): ``replaces_classic`` (an upgrade: the classic group's record as it was, already
    taken out of the classic coordinator) has its record written as a tombstone first, and put
    back if the batch fails; a change that downgraded the group writes the classic group's
    record after the tombstones, and the classic coordinator takes the group over and
    rebalances it."""
    core = broker.consumer_groups
    lock = _CONSUMER_GROUP_LOCKS.setdefault(core, {}).setdefault(group, asyncio.Lock())
    async with lock:
        made = group_routing.change(core, group, change, broker.now_ms(), replaces_classic)
        if not made.records:
            return ErrorCode.NONE
        # a downgrade: its members heartbeat to the classic coordinator from now on
        broker.groups.apply(group_routing.take_over(broker.groups.core, made, broker.now_ms()))
        changed = core.groups.get(group)
        err = await store_record_pairs(broker, group, made.pairs())
        if err is not ErrorCode.NONE:
            if core.groups.get(group) is changed:  # not if unloaded (or reloaded) meanwhile
                broker.groups.apply(group_routing.undo(broker.groups.core, core, made,
                                                       broker.now_ms()))
            return err
        if replaces_classic is not None:
            broker.offsets.store_group(group, None)
            log.info("group %s: upgraded from a classic group to a consumer group "
                     "(KIP-848), generation %d", group, replaces_classic.generation)
        if made.classic is not None:
            broker.offsets.store_group(group, made.classic)
            log.info("group %s: downgraded from a consumer group to a classic group "
                     "(KIP-848) at generation %d with %d members", group,
                     made.classic.generation, len(made.classic.members))
        broker.groups.apply(group_routing.stored(broker.groups.core, made, broker.now_ms()))
        return err


async def store_consumer_group_records(
        broker: HandlerContext, group: str,
        recs: Iterable[cg_records.ConsumerGroupRecord]) -> ErrorCode:
    """Store a KIP-848 consumer group's records (``consumer_group.records``) as one batch in
    its offsets partition, answered once replicated: what a new coordinator replays."""
    return await store_record_pairs(broker, group, [cg_records.encode(r) for r in recs])


async def store_record_pairs(broker: HandlerContext, group: str,
                             pairs: Sequence[tuple[bytes, bytes | None]]) -> ErrorCode:
    """Store a group's records ((key, value) pairs, a None value a tombstone) as one batch in
    its offsets partition, answered once replicated: what a new coordinator replays (KIP-848
    consumer groups, KIP-932 share groups)."""
    if not pairs:
        return ErrorCode.NONE
    err, _last = await _append_replicated(broker, group, lambda now: build_batch(
        [Record(i, now, key, value) for i, (key, value) in enumerate(pairs)]))
    return err


def offset_commit(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                  conn: ClientConnection) -> HandlerResult:
    group = req.group_id
    generation = int(getattr(req, "generation_id_or_member_epoch", getattr(req, "generation_id", -1)))
    err = group_routing.validate_commit(  # KIP-848: the generation is the member epoch
        broker.groups.core, broker.consumer_groups, group, req.member_id, generation,
        getattr(req, "group_instance_id", None), header.api_version, broker.now_ms())
    return store_offsets(broker, group, req.topics, err)


async def store_offsets(broker: HandlerContext, group: str, topics: WireRequest,
                        err: ErrorCode, producer: tuple[int, int] | None = None) -> WireResponse:
    """OffsetCommit's and TxnOffsetCommit's answer: each requested partition checked (a member
    error ``err`` refuses all), the valid ones stored and replicated before the answer."""
    now = broker.now_ms()
    entries: list[tuple[str, int, CommittedOffset | None]] = []
    results = []
    metas = broker.controller.topics()  # cluster metadata: the coordinator need not host them
    for t in topics:
        parts = []
        meta = metas.get(t.name)
        for p in t.partitions:
            perr = err
            if perr == ErrorCode.NONE:
                if meta is None or not 0 <= int(p.partition_index) < len(meta.partitions):
                    perr = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.committed_metadata is not None and len(p.committed_metadata) > 4096:
                    perr = ErrorCode.OFFSET_METADATA_TOO_LARGE
                else:
                    entries.append((t.name, int(p.partition_index), CommittedOffset(
                        int(p.committed_offset),
                        int(getattr(p, "committed_leader_epoch", -1)),
                        p.committed_metadata, now)))
            parts.append({"partition_index": int(p.partition_index), "error_code": int(perr)})
        results.append({"name": t.name, "partitions": parts})
    if entries:
        store_err = await append_offsets_replicated(broker, group, entries, producer)
        if store_err != ErrorCode.NONE:
            for t in results:
                for p in t["partitions"]:
                    if p["error_code"] == 0:
                        p["error_code"] = int(store_err)
    return {"throttle_time": 0, "topics": results}


def _fetch_group(broker: HandlerContext, group: str, topics: WireRequest,
                 require_stable: bool = False) -> list[WireResponse]:
    """The group's committed offsets. ``require_stable`` (v7+, KIP-447; what read_committed
    consumers ask): a partition with a transactional offset still pending (its transaction
    neither committed nor aborted) is UNSTABLE_OFFSET_COMMIT, and the client asks again, rather
    than an older offset that would make it re-read what the transaction consumed."""
    unstable = broker.offsets.pending(group) if require_stable else {}
    if topics is None:
        by_topic: dict[str, list[int]] = {}
        for (topic, partition) in broker.offsets.group_offsets(group):
            by_topic.setdefault(topic, []).append(partition)
        wanted = sorted(by_topic.items())
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in topics]
    out = []
    for topic, partitions in wanted:
        parts = []
        for p in partitions:
            if (topic, int(p)) in unstable:
                parts.append({"partition_index": int(p), "committed_offset": -1,
                              "committed_leader_epoch": -1, "metadata": "",
                              "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT)})
                continue
            c = broker.offsets.fetch(group, topic, int(p))
            parts.append({"partition_index": int(p),
                          "committed_offset": c.offset if c else -1,
                          "committed_leader_epoch": c.leader_epoch if c else -1,
                          "metadata": c.metadata if c else "",
                          "error_code": 0})
        out.append({"name": topic, "partitions": parts})
    return out


def offset_fetch(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    stable = bool(getattr(req, "require_stable", False))
    if header.api_version >= 8:
        groups = []
        for g in req.groups:
            err = ErrorCode.NONE
            if header.api_version >= 9 and group_routing.owner(
                    broker.consumer_groups, g.group_id) is group_routing.Core.CONSUMER:
                err = broker.consumer_groups.validate_fetch(
                    g.group_id, g.member_id, int(g.member_epoch))
            groups.append({"group_id": g.group_id, "error_code": int(err),
                           "topics": _fetch_group(broker, g.group_id, g.topics, stable)
                           if err is ErrorCode.NONE else []})
        return {"throttle_time": 0, "groups": groups}
    return {"throttle_time": 0, "error_code": 0,
            "topics": _fetch_group(broker, req.group_id, req.topics, stable)}


def list_groups(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    wanted = set(getattr(req, "states_filter", ()) or ())
    # v5 (KIP-848): the types filter, matched in any case (classic, consumer or share)
    types = {str(t).lower() for t in getattr(req, "types_filter", ()) or ()}
    consumer_groups = broker.consumer_groups.groups
    names = set(broker.groups.groups) | set(broker.offsets.groups()) | set(consumer_groups)
    share_groups = broker.share_groups.coordinator.groups  # KIP-932
    out = []
    for name in sorted(names | set(share_groups)):
        if broker.coordinator_error(name) is not ErrorCode.NONE:
            continue  # as Kafka: a broker lists the groups it coordinates, no stale ones
        if name in share_groups:
            state = share_groups[name].state.value
            if (not wanted or state in wanted) and (not types or SHARE in types):
                out.append({"group_id": name, "protocol_type": "share",
                            "group_state": state, "group_type": SHARE})
            continue
        if name in consumer_groups:  # KIP-848
            state = consumer_groups[name].state.value
            if (not wanted or state in wanted) and (not types or CONSUMER in types):
                out.append({"group_id": name, "protocol_type": "consumer",
                            "group_state": state, "group_type": CONSUMER})
            continue
        if types and CLASSIC not in types:
            continue
        desc = broker.groups.describe(name)
        state = desc["group_state"] if name in broker.groups.groups else "Empty"
        if wanted and state not in wanted:
            continue
        out.append({"group_id": name, "protocol_type": desc["protocol_type"],
                    "group_state": state, "group_type": CLASSIC})
    return {"throttle_time": 0, "error_code": 0, "groups": out}


def describe_groups(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    out = []
    for gid in req.groups:
        err = broker.coordinator_error(gid)
        if err is not ErrorCode.NONE:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
            out.append({"group_id": gid, "error_code": int(err), "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": [],
                        "authorized_operations": -(2**31)})
            continue
        desc = broker.groups.describe(gid)
        if desc["group_state"] == "Dead" and gid in broker.offsets.groups():
            desc["group_state"] = "Empty"
        if desc["group_state"] == "Dead" and header.api_version >= 6:
            # v6 (KIP-1043): an unknown group is an error, no longer a Dead group
            out.append({**desc, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                        "error_message": f"Group {gid} not found.",
                        "authorized_operations": -(2**31)})
            continue
        out.append({**desc, "error_code": 0, "authorized_operations": -(2**31)})
    return {"throttle_time": 0, "groups": out}


def delete_groups(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                  conn: ClientConnection) -> HandlerResult:
    """DeleteGroups: an empty group's committed offsets become tombstones in its offsets
    partition (compaction removes them; answered once replicated) and its state goes."""
    return _delete_groups(broker, list(req.groups_names))


async def _delete_groups(broker: HandlerContext, names: list[str]) -> WireResponse:
    results = []
    for group in names:
        route = group_routing.delete_route(group in broker.share_groups.coordinator.groups,
                                     broker.consumer_groups, broker.groups.groups,
                                     bool(broker.offsets.group_offsets(group)), group)
        if not broker.is_coordinator(group):
            err = ErrorCode.NOT_COORDINATOR
        elif route is group_routing.Delete.SHARE:
            err = await broker.share_groups.delete_group(group, broker.controller.topics(),
                                                         broker.now_ms())
        elif route is group_routing.Delete.CONSUMER:
            refused: list[ErrorCode] = []

            def delete(group: str = group, refused: list[ErrorCode] = refused
                       ) -> list[cg_records.ConsumerGroupRecord]:
                found, recs = broker.consumer_groups.delete(group)
                refused.append(found)
                return recs

            err = await change_consumer_group(broker, group, delete)
            if refused and refused[0] is not ErrorCode.NONE:
                err = refused[0]
            offsets = list(broker.offsets.group_offsets(group))
            if err is ErrorCode.NONE and offsets:
                err = await append_offsets_replicated(broker, group,
                                                      [(t, p, None) for t, p in offsets])
        elif route is group_routing.Delete.NOT_FOUND:
            err = ErrorCode.GROUP_ID_NOT_FOUND
        else:
            err = broker.groups.delete(group)
            offsets = list(broker.offsets.group_offsets(group))
            if err is ErrorCode.NONE and offsets:
                err = await append_offsets_replicated(broker, group,
                                                      [(t, p, None) for t, p in offsets])
            if err is ErrorCode.NONE and group in broker.offsets.group_records:
                err = await store_group(broker, group, None)  # the group's record goes too
        if err is ErrorCode.NONE:
            log.info("group %s deleted", group)
        results.append({"group_id": group, "error_code": int(err)})
    return {"throttle_time": 0, "results": results}


def _refuse_offset_delete(err: ErrorCode) -> WireResponse:
    return {"error_code": int(err), "throttle_time": 0, "topics": []}


def offset_delete(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                  conn: ClientConnection) -> HandlerResult:
    """OffsetDelete (KIP-496): committed offsets of partitions the group no longer consumes
    (tombstones, answered once replicated)."""
    group = req.group_id
    if not broker.is_coordinator(group):
        return _refuse_offset_delete(ErrorCode.NOT_COORDINATOR)
    if group not in broker.groups.groups and not broker.offsets.group_offsets(group):
        return _refuse_offset_delete(ErrorCode.GROUP_ID_NOT_FOUND)
    subscribed = (broker.groups.subscribed_topics(group) or set()) | \
        broker.consumer_groups.subscribed_topics(group)
    tombstones: list[tuple[str, int, CommittedOffset | None]] = []
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            err = ErrorCode.NONE
            if t.name in subscribed:
                err = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            elif broker.offsets.fetch(group, t.name, int(p.partition_index)) is not None:
                tombstones.append((t.name, int(p.partition_index), None))
            parts.append({"partition_index": int(p.partition_index), "error_code": int(err)})
        topics.append({"name": t.name, "partitions": parts})
    answer = {"error_code": 0, "throttle_time": 0, "topics": topics}
    if not tombstones:
        return answer
    return _store_tombstones(broker, group, tombstones, answer)


async def _store_tombstones(broker: HandlerContext, group: str,
                            tombstones: list[tuple[str, int, CommittedOffset | None]],
                            answer: WireResponse) -> WireResponse:
    err = await append_offsets_replicated(broker, group, tombstones)
    return answer if err is ErrorCode.NONE else _refuse_offset_delete(err)
