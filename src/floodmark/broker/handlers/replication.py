"""The replication path through the handler table: a Fetch from a replica goes to the broker's
``ReplicaManager`` (a cluster member's; a lone broker has none and serves every Fetch as a
consumer's), and appends on a leader wake the follower fetches parked there."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest
from floodmark.broker.context import HandlerContext
from floodmark.broker.handlers import data
from floodmark.broker.replica_fetcher import replica_of
from floodmark.wire.codec import RequestHeader

P = ParamSpec("P")
R = TypeVar("R")


def fetch(ctx: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> HandlerResult:
    version = header.api_version
    replicas = ctx.replicas
    if replicas is not None and replica_of(req, version)[0] >= 0:
        return replicas.answer_fetch(ctx, header, req)
    return data.fetch(ctx, header, req, conn)


def wakes_followers(handler: Callable[Concatenate[HandlerContext, P], R]
                    ) -> Callable[Concatenate[HandlerContext, P], R]:
    """``handler`` appends on the leader (records, committed offsets): the follower fetches
    parked there wake after it."""

    @functools.wraps(handler)
    def handle(ctx: HandlerContext, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result = handler(ctx, *args, **kwargs)
        replicas = ctx.replicas
        if replicas is not None:
            replicas.leader_appended()
        return result

    return handle
