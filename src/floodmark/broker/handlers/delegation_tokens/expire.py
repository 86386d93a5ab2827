"""ExpireDelegationToken (API 40, v1-2): the token named by its HMAC expires after the given
period (a negative one: at once, the token removed), if the caller owns or renews it (the
controller decides: ``delegation_tokens.expire``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers.delegation_tokens import requester
from floodmark.broker.handlers.delegation_tokens.renew import change_expiry
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


async def expire_delegation_token(ctx: HandlerContext, header: RequestHeader,
                                  req: WireRequest, conn: ClientConnection) -> WireResponse:
    return await change_expiry(ctx, conn, bytes(req.hmac), lambda token_id: (
        ctx.controller.expire_delegation_token(token_id, requester(conn),
                                               ms(req.expiry_time_period))))
