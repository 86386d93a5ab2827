"""AddRaftVoter (80) and RemoveRaftVoter (81), KIP-853: an operator changes the controllers'
voter set (Kafka's ``kafka-metadata-quorum.sh add-controller|remove-controller``, Admin's
``addRaftVoter``/``removeRaftVoter``). Kafka's brokers forward them to the active controller;
so does this one (``Controller.change_raft_voters``), whose quorum leader decides
(``QuorumCore.add_voter``/``remove_voter``) and answers once the voter set record is committed.

Differences from Kafka (docs/wire.md): the new voter's listeners are not taken from the request
(the controllers learn a new controller's address from its own quorum messages,
``controller/quorum_node.py``); v0 only, what Kafka 4.1.1 brokers advertise.
UpdateRaftVoter (82) is controller-only in Kafka (a voter tells the leader its endpoints), and
floodmark's controllers do that over their own RPC: brokers do not serve it, as Kafka's.
"""

from __future__ import annotations

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.errors import ErrorCode, KafkaError
from floodmark.wire import RequestHeader

ZERO_UUID = "00000000-0000-0000-0000-000000000000"  # Kafka's Uuid.ZERO_UUID: no directory


async def add_raft_voter(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                         conn: ClientConnection | None = None) -> WireResponse:
    return await _change(ctx, req, add=True)


async def remove_raft_voter(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection | None = None) -> WireResponse:
    return await _change(ctx, req, add=False)


async def _change(ctx: HandlerContext, req: WireRequest, *, add: bool) -> WireResponse:
    cluster_id = getattr(req, "cluster_id", None)
    if cluster_id is not None and str(cluster_id) != ctx.controller.cluster_id:
        return _answer(ErrorCode.INCONSISTENT_CLUSTER_ID,
                       f"cluster id {cluster_id} is not this cluster's "
                       f"({ctx.controller.cluster_id})")
    directory = req.voter_directory_id
    directory_id = "" if directory is None or str(directory) == ZERO_UUID else str(directory)
    try:
        await ctx.controller.change_raft_voters(add, int(req.voter_id), directory_id)
    except KafkaError as exc:
        return _answer(exc.code, exc.message or None)
    return _answer(ErrorCode.NONE, None)


def _answer(error: ErrorCode, message: str | None) -> WireResponse:
    return {"throttle_time": 0, "error_code": int(error), "error_message": message}
