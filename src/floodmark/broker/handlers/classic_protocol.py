"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup, routed by the kind of the group they name
(``group_routing``, the rule the simulator runs too): a classic group's are ``group_apis``'
(the classic coordinator); a consumer group's come from *classic protocol members* of that
consumer group (KIP-848's online migration, Kafka 4), served by
``consumer_group.classic_members`` and stored as the consumer group's records.

A JoinGroup into a consumer group with members is always served this way (Kafka's
``classicGroupJoinToConsumerGroup``; the migration policy governs only the conversions); an
empty consumer group gives way to a classic group (``group_apis.join_group``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from floodmark.broker import group_routing
from floodmark.broker.boundary import (
    Answer,
    ClientConnection,
    HandlerResult,
    WireRequest,
    WireResponse,
)
from floodmark.broker.consumer_group import classic_members
from floodmark.broker.consumer_group import records as cg_records
from floodmark.broker.handlers import group_apis
from floodmark.broker.handlers.consumer_group_apis import topics_view
from floodmark.errors import ErrorCode
from floodmark.wire import PROTOCOL_TYPE, RequestHeader, encode_assignment, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

log = logging.getLogger(__name__)


def _classic(ctx: HandlerContext, group_id: str) -> bool:
    return group_routing.owner(ctx.consumer_groups, group_id) is group_routing.Core.CLASSIC


Handler: TypeAlias = \
    "Callable[[HandlerContext, RequestHeader, WireRequest, ClientConnection], HandlerResult]"


def _routed_when_settled(handler: Handler) -> Handler:
    """Route a request by its group's kind only once no change of the group is being stored
    (``group_apis.settled``): at once when none is, else after it."""

    def run(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
            conn: ClientConnection) -> HandlerResult:
        if group_apis.change_in_flight(ctx, str(req.group_id)) is None:
            return handler(ctx, header, req, conn)
        return _after_settled(handler, ctx, header, req, conn)

    return run


async def _after_settled(handler: Handler, ctx: HandlerContext, header: RequestHeader,
                         req: WireRequest, conn: ClientConnection) -> Answer:
    await group_apis.settled(ctx, str(req.group_id))
    result = handler(ctx, header, req, conn)
    return await result if inspect.isawaitable(result) else result


@_routed_when_settled
def join_group(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
               conn: ClientConnection) -> HandlerResult:
    if group_routing.join_group(ctx.consumer_groups, req.group_id) is not \
            group_routing.Join.CONSUMER:
        return group_apis.join_group(ctx, header, req, conn)
    return _join(ctx, header, req, conn)


async def _join(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                conn: ClientConnection) -> WireResponse:
    version = header.api_version
    session_ms = ms(req.session_timeout)
    rebalance_ms = ms(getattr(req, "rebalance_timeout", None)) if version >= 1 else session_ms
    join = classic_members.ClassicJoin(
        str(req.group_id), str(req.member_id or ""),
        getattr(req, "group_instance_id", None), header.client_id or "",
        "/" + conn.peer.rsplit(":", 1)[0], session_ms,
        rebalance_ms if rebalance_ms >= 0 else session_ms, str(req.protocol_type),
        tuple((str(p.name), bytes(p.metadata)) for p in req.protocols), version >= 4)
    answers: list[classic_members.ClassicJoinAnswer] = []

    def change() -> tuple[cg_records.ConsumerGroupRecord, ...]:
        if group_routing.join_group(ctx.consumer_groups, join.group_id) is not \
                group_routing.Join.CONSUMER:
            # it became a classic group (or went) meanwhile: the member joins again
            answers.append(classic_members.ClassicJoinAnswer(
                ErrorCode.REBALANCE_IN_PROGRESS, join.member_id))
            return ()
        answers.append(classic_members.join(ctx.consumer_groups, join, topics_view(ctx),
                                            ctx.now_ms()))
        return answers[0].records

    err = await group_apis.change_consumer_group(ctx, join.group_id, change)
    ans = answers[0]
    if ans.error is ErrorCode.NONE and err is not ErrorCode.NONE:
        ans = classic_members.ClassicJoinAnswer(err, ans.member_id)
    if ans.error is not ErrorCode.NONE and ans.error is not ErrorCode.MEMBER_ID_REQUIRED:
        log.info("group %s member %r: JoinGroup into a consumer group refused: %s (%s)",
                 join.group_id, join.member_id, ans.error.name, ans.message)
    return {
        "throttle_time": 0, "error_code": int(ans.error),
        "generation_id": ans.generation_id,
        "protocol_type": PROTOCOL_TYPE if ans.error is ErrorCode.NONE else None,
        "protocol_name": ans.protocol_name or (None if version >= 7 else ""),
        "leader": "", "skip_assignment": False, "member_id": ans.member_id, "members": []}


@_routed_when_settled
def sync_group(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
               conn: ClientConnection) -> HandlerResult:
    if _classic(ctx, req.group_id):
        return group_apis.sync_group(ctx, header, req, conn)
    protocol_type = getattr(req, "protocol_type", None)
    protocol_name = getattr(req, "protocol_name", None)
    err, assigned, embedded_version = classic_members.sync(
        ctx.consumer_groups, str(req.group_id), str(req.member_id), int(req.generation_id),
        getattr(req, "group_instance_id", None), protocol_type, protocol_name, ctx.now_ms())
    assignment = b""
    if err is ErrorCode.NONE:
        names = {t.topic_id: t.name for t in topics_view(ctx).values()}
        by_topic: dict[str, tuple[int, ...]] = {}
        for topic_id, p in assigned:
            if topic_id in names:
                by_topic[names[topic_id]] = (*by_topic.get(names[topic_id], ()), p)
        assignment = encode_assignment(by_topic, embedded_version)
    ok = err is ErrorCode.NONE
    return {"throttle_time": 0, "error_code": int(err),
            "protocol_type": protocol_type if ok else None,
            "protocol_name": protocol_name if ok else None, "assignment": assignment}


@_routed_when_settled
def heartbeat(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
              conn: ClientConnection) -> HandlerResult:
    if _classic(ctx, req.group_id):
        return group_apis.heartbeat(ctx, header, req, conn)
    err = classic_members.heartbeat(ctx.consumer_groups, str(req.group_id), str(req.member_id),
                                    int(req.generation_id),
                                    getattr(req, "group_instance_id", None), ctx.now_ms())
    return {"throttle_time": 0, "error_code": int(err)}


@_routed_when_settled
def leave_group(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                conn: ClientConnection) -> HandlerResult:
    if _classic(ctx, req.group_id):
        return group_apis.leave_group(ctx, header, req, conn)
    return _leave(ctx, header, req)


async def _leave(ctx: HandlerContext, header: RequestHeader, req: WireRequest) -> WireResponse:
    group_id = str(req.group_id)
    if header.api_version >= 3:
        wanted = [(str(m.member_id or ""), m.group_instance_id) for m in req.members]
    else:
        wanted = [(str(req.member_id), None)]
    answers: list[tuple[str, str | None, ErrorCode]] = []

    def change() -> list[cg_records.ConsumerGroupRecord]:
        if _classic(ctx, group_id):
            answers.extend((m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in wanted)
            return []
        out, records = classic_members.leave(ctx.consumer_groups, group_id, wanted,
                                             topics_view(ctx))
        answers.extend(out)
        return records

    err = await group_apis.change_consumer_group(ctx, group_id, change)
    if header.api_version >= 3:
        return {"throttle_time": 0, "error_code": int(err),
                "members": [{"member_id": m, "group_instance_id": i,
                             "error_code": int(e)} for m, i, e in answers]}
    return {"throttle_time": 0,
            "error_code": int(err if err is not ErrorCode.NONE else answers[0][2])}
