"""Which broker coordinates a group or a transactional id: FindCoordinator, and NOT_COORDINATOR
from any other.

A group's coordinator is the leader of its ``__consumer_offsets`` partition, a transactional
id's the leader of its ``__transaction_state`` partition (``key_type`` 1; the membership says
who: a lone broker coordinates everything). A stale coordinator must not write a
follower's log, so the group APIs a coordinator serves (``coordinated``) are refused elsewhere,
each in its own response shape.
"""

from __future__ import annotations

import functools

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.context import Handler, HandlerContext
from floodmark.errors import ErrorCode
from floodmark.metadata import CoordinatorType
from floodmark.wire import ApiKey, RequestHeader


def find_coordinator(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                     conn: ClientConnection) -> WireResponse:
    membership = ctx.membership
    # The coordinator's endpoint of the listener the request came in on (None: in-process
    # calls without a connection get the inter-broker one).
    listener: str | None = getattr(conn, "listener_name", None)
    try:
        key_type = CoordinatorType(int(getattr(req, "key_type", 0)))
    except ValueError:
        key_type = None

    def answer(key: str) -> WireResponse:
        if key_type is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": int(ErrorCode.INVALID_REQUEST),
                    "error_message": f"unknown key_type {int(req.key_type)}"}
        node_id = membership.coordinator_for(key, key_type)
        address = (membership.broker_address(node_id, listener) if node_id >= 0 else None)
        if address is None:
            return {"key": key, "node_id": -1, "host": "", "port": -1,
                    "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                    "error_message": f"no live leader for the key's {key_type.topic} "
                                     f"partition"}
        host, port = address
        return {"key": key, "node_id": node_id, "host": host, "port": port,
                "error_code": 0, "error_message": None}

    if header.api_version >= 4:
        return {"throttle_time": 0, "coordinators": [answer(k) for k in req.coordinator_keys]}
    one = answer(req.key)
    del one["key"]
    return {"throttle_time": 0, **one}


def coordinated(handler: Handler) -> Handler:
    """``handler`` is served by the group's coordinator only."""

    @functools.wraps(handler)
    def handle(ctx: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
        refusal = _not_coordinator(ctx, header, req)
        return refusal if refusal is not None else handler(ctx, header, req, conn)

    return handle


def _not_coordinator(ctx: HandlerContext, header: RequestHeader,
                     req: WireRequest) -> WireResponse | None:
    """NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (in the request's own response shape)
    unless this broker coordinates every group the request names and has loaded them."""
    api, version = header.api_key, header.api_version
    if api == ApiKey.OFFSET_FETCH and version >= 8:
        groups = [g.group_id for g in req.groups]
    else:
        groups = [req.group_id]
    errors = [ctx.coordinator_error(g) for g in groups]
    refused = next((e for e in errors if e is not ErrorCode.NONE), None)
    if refused is None:
        return None
    err = int(refused)  # NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while loading
    if api in (ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT):
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": int(p.partition_index),
                                             "error_code": err} for p in t.partitions]}
            for t in req.topics]}
    if api == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return {"throttle_time": 0, "groups": [
                {"group_id": g, "topics": [], "error_code": err} for g in groups]}
        return {"throttle_time": 0, "error_code": err, "topics": []}
    if api == ApiKey.LEAVE_GROUP:
        return {"throttle_time": 0, "error_code": err, "members": []}
    if api == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return {"throttle_time": 0, "error_code": err, "member_id": None,
                "member_epoch": int(req.member_epoch), "heartbeat_interval": 0}
    if api == ApiKey.JOIN_GROUP:
        return {"throttle_time": 0, "error_code": err, "generation_id": -1,
                "leader": "", "member_id": "", "members": []}
    return {"throttle_time": 0, "error_code": err}
