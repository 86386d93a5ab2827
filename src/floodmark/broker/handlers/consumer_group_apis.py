"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), served by the group's
coordinator: the wire translated to the core's typed values (``consumer_group.core``) and back;
the records the core emits are stored in the group's ``__consumer_offsets`` partition and the
member is answered only once they are replicated (a failover then loads what it was told).

A group id is either a classic group or a consumer group (``group_routing``, the rule the
simulator runs too). A heartbeat joining (epoch 0) a classic group with members upgrades it to
a consumer group (KIP-848's online migration, ``consumer_group.migration``) when
``group.consumer.migration.policy`` allows it and the group uses the consumer protocol; else it
is GROUP_ID_NOT_FOUND, as Kafka answers. An empty classic group gives way. Classic members of
a consumer group are ``classic_protocol``'s.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from floodmark.broker import group_routing
from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.consumer_group import records as cg_records
from floodmark.broker.consumer_group.assignors import Partitions
from floodmark.broker.consumer_group.core import ConsumerGroup, Heartbeat, HeartbeatAnswer
from floodmark.broker.handlers.group_apis import change_consumer_group, settled, store_group
from floodmark.broker.offsets import GroupRecord
from floodmark.errors import ErrorCode
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

log = logging.getLogger(__name__)


def topics_view(ctx: HandlerContext) -> dict[str, cg_records.TopicMetadata]:
    """The cluster's topics as the core sees them (name -> id, partition count, and the racks
    of each partition's replicas on live brokers, for the rack-aware assignor); the internal
    ones too: a member may subscribe to them, by name or regular expression, as in Kafka."""
    racks = {b["node_id"]: rack for b in ctx.live_brokers() if (rack := b.get("rack"))}
    return {name: cg_records.TopicMetadata(
                meta.topic_id, name, len(meta.partitions),
                tuple(frozenset(racks[r] for r in p.replicas if r in racks)
                      for p in sorted(meta.partitions, key=lambda p: p.partition)))
            for name, meta in ctx.controller.topics().items()}


def _partitions(topic_partitions: Iterable[WireRequest] | None) -> Partitions | None:
    if topic_partitions is None:
        return None
    return frozenset((t.topic_id, int(p)) for t in topic_partitions if t.topic_id is not None
                     for p in t.partitions)


def _wire_partitions(parts: Partitions) -> list[WireResponse]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in parts:
        by_topic.setdefault(topic_id, []).append(p)
    return [{"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0]))]


def _answer(ans: HeartbeatAnswer, err: ErrorCode | None = None) -> WireResponse:
    error = ans.error if err is None else err
    out: WireResponse = {
        "throttle_time": 0, "error_code": int(error),
        "error_message": ans.message if err is None else None,
        "member_id": ans.member_id or None, "member_epoch": ans.member_epoch,
        "heartbeat_interval": ans.heartbeat_interval_ms, "assignment": None}
    if error is ErrorCode.NONE and ans.assignment is not None:
        out["assignment"] = {"topic_partitions": _wire_partitions(ans.assignment)}
    return out


def consumer_group_heartbeat(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                             conn: ClientConnection) -> HandlerResult:
    return _heartbeat(ctx, header, req, conn)


async def _heartbeat(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                     conn: ClientConnection) -> WireResponse:
    group_id = str(req.group_id)
    epoch = int(req.member_epoch)
    member_id = str(req.member_id or "")
    if not member_id and epoch == 0 and header.api_version == 0:
        member_id = str(uuid.uuid4())  # v0: the coordinator names a new member
    await settled(ctx, group_id)  # the group's kind, as stored (not a change being undone)
    interval_ms = ctx.consumer_groups.config_of(group_id).heartbeat_interval_ms
    route = group_routing.consumer_group_heartbeat(
        ctx.groups.groups, ctx.consumer_groups, group_id, epoch,
        classic_stored=group_id in ctx.offsets.group_records)
    if route.refused is not None:
        log.info("group %s: a classic group is not upgraded to a consumer group: %s",
                 group_id, route.refused)
        return {"throttle_time": 0, "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                "error_message": f"Group {group_id} is not a consumer group",
                "member_id": member_id or None, "member_epoch": epoch,
                "heartbeat_interval": interval_ms, "assignment": None}
    if route.classic_gives_way:
        # An empty classic group gives way to the consumer group (its record goes).
        ctx.groups.delete(group_id)
        if group_id in ctx.offsets.group_records:
            err = await store_group(ctx, group_id, None)
            if err is not ErrorCode.NONE:
                return {"throttle_time": 0, "error_code": int(err), "member_id": None,
                        "member_epoch": epoch, "heartbeat_interval": interval_ms}
    rebalance_timeout_ms = ms(req.rebalance_timeout)
    names = req.subscribed_topic_names
    hb = Heartbeat(
        group_id, member_id, epoch, client_id=header.client_id or "",
        client_host="/" + conn.peer.rsplit(":", 1)[0],
        instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms >= 0 else -1,
        subscribed_topic_names=None if names is None else tuple(str(n) for n in names),
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor, owned=_partitions(req.topic_partitions))
    answers: list[HeartbeatAnswer] = []
    replaces: GroupRecord | None = None
    if route.upgrade is not None:
        # its members answer to the consumer group's rules from now on; back if refused or
        # if the store fails
        replaces, effects = group_routing.begin_upgrade(ctx.groups.core, route.upgrade,
                                                        ctx.now_ms())
        ctx.groups.apply(effects)

    def beat() -> list[cg_records.ConsumerGroupRecord]:
        ans, records = group_routing.heartbeat(ctx.consumer_groups, hb, route.upgrade,
                                               topics_view(ctx), ctx.now_ms())
        answers.append(ans)
        return records

    err = await change_consumer_group(ctx, group_id, beat, replaces_classic=replaces)
    ans = answers[0]
    if replaces is not None and ans.error is not ErrorCode.NONE:
        ctx.groups.load(group_id, replaces)  # not converted: the classic group stays
    if ans.error is not ErrorCode.NONE:
        log.info("group %s member %s epoch %d: ConsumerGroupHeartbeat refused: %s (%s)",
                 group_id, member_id, epoch, ans.error.name, ans.message)
        return _answer(ans)
    if err is not ErrorCode.NONE:
        log.warning("group %s member %s: storing the group's records failed (%s): the "
                    "heartbeat is undone", group_id, member_id, err.name)
        return _answer(ans, err)
    return _answer(ans)


async def expire_members(ctx: HandlerContext) -> None:
    """Remove the members whose session or revocation timed out, and store that."""
    core = ctx.consumer_groups
    for group_id, member_id, why in core.expired(ctx.now_ms()):
        removed: list[bool] = []

        def expire(group_id: str = group_id, member_id: str = member_id,
                   removed: list[bool] = removed) -> list[cg_records.ConsumerGroupRecord]:
            records = core.expire(group_id, member_id, topics_view(ctx), ctx.now_ms())
            removed.append(bool(records))
            return records

        err = await change_consumer_group(ctx, group_id, expire)
        if err is not ErrorCode.NONE:
            log.warning("group %s: storing the removal of member %s failed: %s (retried)",
                        group_id, member_id, err.name)
        elif removed and removed[0]:
            log.info("group %s: member %s %s, removed", group_id, member_id, why)


def _describe_member(g: ConsumerGroup, member_id: str,
                     names: Mapping[uuid.UUID, str]) -> WireResponse:
    m = g.members[member_id]

    def assignment(parts: Partitions) -> WireResponse:
        return {"topic_partitions": [{**tp, "topic_name": names.get(tp["topic_id"], "")}
                                     for tp in _wire_partitions(parts)]}

    s = m.subscription
    return {"member_id": member_id, "instance_id": s.instance_id, "rack_id": s.rack_id,
            "member_epoch": m.member_epoch, "client_id": s.client_id,
            "client_host": s.client_host,
            "subscribed_topic_names": list(s.subscribed_topic_names),
            "subscribed_topic_regex": s.subscribed_topic_regex,
            "assignment": assignment(m.current.assigned),
            "target_assignment": assignment(g.target.get(member_id, frozenset())),
            "member_type": 0 if m.uses_classic_protocol else 1}  # v1: classic 0, consumer 1


def consumer_group_describe(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection) -> WireResponse:
    out = []
    names = {t.topic_id: t.name for t in topics_view(ctx).values()}
    default_assignor = ctx.consumer_groups.config.assignors[0]
    for group_id in req.group_ids:
        base: WireResponse = {"group_id": group_id, "group_state": "", "group_epoch": -1,
                              "assignment_epoch": -1, "assignor_name": "", "members": [],
                              "authorized_operations": -(2**31), "error_message": None}
        err = ctx.coordinator_error(group_id)
        g = ctx.consumer_groups.groups.get(group_id)
        if err is ErrorCode.NONE and g is None:
            err = ErrorCode.GROUP_ID_NOT_FOUND
            base["error_message"] = (f"Group {group_id} is not a consumer group"
                                     if group_id in ctx.groups.groups
                                     else f"Group {group_id} not found.")
        if err is not ErrorCode.NONE or g is None:
            out.append({**base, "error_code": int(err)})
            continue
        out.append({**base, "error_code": 0, "group_state": g.state.value,
                    "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                    "assignor_name": g.preferred_assignor(default_assignor),
                    "members": [_describe_member(g, m, names) for m in sorted(g.members)]})
    return {"throttle_time": 0, "groups": out}
