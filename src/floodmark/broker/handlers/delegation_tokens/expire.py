"""ExpireDelegationToken (API 40, v1-2): the token named by its HMAC expires after the given
period (a negative one: at once, the token removed), if the caller owns or renews it (the
controller decides: ``delegation_tokens.expire``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers.delegation_tokens import refusal, requester, token_by_hmac
from floodmark.broker.handlers.delegation_tokens.renew import answer
from floodmark.errors import ErrorCode, KafkaError
from floodmark.wire.codec import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


async def expire_delegation_token(ctx: HandlerContext, header: RequestHeader,
                                  req: WireRequest, conn: ClientConnection) -> WireResponse:
    error = refusal(ctx, conn)
    if error is not None:
        return answer(error)
    token = token_by_hmac(ctx, bytes(req.hmac))
    if token is None:
        return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    try:
        decision = await ctx.controller.expire_delegation_token(
            token.token_id, requester(conn), ms(req.expiry_time_period))
    except KafkaError as exc:
        return answer(exc.code)
    if decision.error is not ErrorCode.NONE:
        return answer(decision.error)
    return answer(ErrorCode.NONE, decision.expiry_ms)
