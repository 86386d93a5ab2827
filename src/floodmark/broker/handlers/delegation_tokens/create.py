"""CreateDelegationToken (API 38, v1-3): a token for the caller, or (v3, KIP-373) for another
owner, which takes CreateTokens on that user (dispatch's check). The controller decides and
writes it; the answer carries the HMAC this broker computes from the new token's id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers.delegation_tokens import (
    NO_TIMESTAMP,
    hmac_of,
    refusal,
    requester,
    settings,
    wire_time,
)
from floodmark.errors import ErrorCode, KafkaError
from floodmark.security import KafkaPrincipal
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


def owner_of(req: WireRequest, caller: KafkaPrincipal) -> KafkaPrincipal:
    """The owner asked for (v3), else the caller (Kafka: a null or empty owner name)."""
    name = getattr(req, "owner_principal_name", None)
    if not name:
        return KafkaPrincipal(caller.principal_type, caller.name)
    return KafkaPrincipal(str(req.owner_principal_type or ""), str(name))


def refused(error: ErrorCode, owner: KafkaPrincipal, caller: KafkaPrincipal) -> WireResponse:
    """Kafka's ``CreateDelegationTokenResponse.prepareResponse(error, owner, requester)``."""
    return answer(error, owner, caller, NO_TIMESTAMP, NO_TIMESTAMP, NO_TIMESTAMP, "", b"")


def answer(error: ErrorCode, owner: KafkaPrincipal, caller: KafkaPrincipal, issue_ms: int,
           expiry_ms: int, max_ms: int, token_id: str, hmac: bytes) -> WireResponse:
    return {"error_code": int(error), "principal_type": owner.principal_type,
            "principal_name": owner.name, "token_requester_principal_type": caller.principal_type,
            "token_requester_principal_name": caller.name, "issue_timestamp": wire_time(issue_ms),
            "expiry_timestamp": wire_time(expiry_ms), "max_timestamp": wire_time(max_ms),
            "token_id": token_id,
            "hmac": hmac, "throttle_time": 0}


async def create_delegation_token(ctx: HandlerContext, header: RequestHeader,
                                  req: WireRequest, conn: ClientConnection) -> WireResponse:
    caller = requester(conn)
    owner = owner_of(req, caller)
    error = refusal(ctx, conn)
    if error is not None:
        return refused(error, owner, caller)
    renewers = [KafkaPrincipal(str(r.principal_type), str(r.principal_name))
                for r in req.renewers]
    try:
        decision = await ctx.controller.create_delegation_token(
            owner, caller, renewers, ms(req.max_lifetime), settings(ctx))
    except KafkaError as exc:
        return refused(exc.code, owner, caller)
    token = decision.token
    if decision.error is not ErrorCode.NONE or token is None:
        return refused(decision.error, owner, caller)
    return answer(ErrorCode.NONE, token.owner, token.requester, token.issue_ms, token.expiry_ms,
                  token.max_ms, token.token_id, hmac_of(ctx, token))
