"""The replication path through the handler table: a Fetch from a replica goes to the broker's
``ReplicaManager`` (a cluster member's; a lone broker has none and serves every Fetch as a
consumer's).

An append on a leader wakes the follower fetches parked there right after the append, whoever
appends (a Produce, WriteTxnMarkers, the group and transaction coordinators): the core's
``Partition.on_leader_append`` returns ``WakeFollowerFetches`` and the partition's driver applies
it (``Broker.wake_replica_fetches`` wakes the broker's one purgatory, where a replica's Fetch
waits as a consumer's does). Not from a wrapper around the
handler: a handler that appends after an await (a produce whose transaction is verified first,
KIP-890) would wake them before its append, and each follower would miss it and wait out its
fetch's max wait."""

from __future__ import annotations

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest
from floodmark.broker.context import HandlerContext
from floodmark.broker.handlers import data
from floodmark.broker.replica_fetcher import replica_of
from floodmark.wire import RequestHeader


def fetch(ctx: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection,
          denied: data.TopicGate | None = None) -> HandlerResult:
    """``denied``: a consumer's topics authorization refuses (a replica's Fetch is authorized
    as a whole, ClusterAction, before it comes here)."""
    version = header.api_version
    replicas = ctx.replicas
    if replicas is not None and replica_of(req, version)[0] >= 0:
        return replicas.answer_fetch(ctx, header, req)
    return data.fetch(ctx, header, req, conn, denied)
