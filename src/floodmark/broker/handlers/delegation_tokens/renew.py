"""RenewDelegationToken (API 39, v1-2): the token named by its HMAC gets a later expiry, if the
caller owns or renews it (the controller decides: ``delegation_tokens.renew``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers.delegation_tokens import (
    NO_TIMESTAMP,
    refusal,
    requester,
    settings,
    token_by_hmac,
    wire_time,
)
from floodmark.controller import Decision
from floodmark.errors import ErrorCode, KafkaError
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


def answer(error: ErrorCode, expiry_ms: int = NO_TIMESTAMP) -> WireResponse:
    return {"error_code": int(error), "expiry_timestamp": wire_time(expiry_ms),
            "throttle_time": 0}


async def renew_delegation_token(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                                 conn: ClientConnection) -> WireResponse:
    return await change_expiry(ctx, conn, bytes(req.hmac), lambda token_id: (
        ctx.controller.renew_delegation_token(token_id, requester(conn), ms(req.renew_period),
                                              settings(ctx))))


async def change_expiry(ctx: HandlerContext, conn: ClientConnection, hmac: bytes,
                        change: Callable[[str], Awaitable[Decision]]) -> WireResponse:
    """Renew and Expire: the token named by its HMAC, its expiry changed by the active
    controller (``change``, given the token id), the answer its new expiry or why not."""
    error = refusal(ctx, conn)
    if error is not None:
        return answer(error)
    token = token_by_hmac(ctx, hmac)
    if token is None:
        return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    try:
        decision = await change(token.token_id)
    except KafkaError as exc:
        return answer(exc.code)
    if decision.error is not ErrorCode.NONE:
        return answer(decision.error)
    return answer(ErrorCode.NONE, decision.expiry_ms)
