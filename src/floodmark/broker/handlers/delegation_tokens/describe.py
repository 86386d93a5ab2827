"""DescribeDelegationToken (API 41, v1-3): the tokens of the owners asked about (as owner or
renewer; null: every token, an empty list: none), read from this broker's metadata image. Which
of them the caller may see (its own, those it renews, or with Describe on the token or
DescribeTokens on the owner: ``delegation_tokens.describable``) is dispatch's check
(``broker/authorization.py``), which filters this answer; without an authorizer every one is
answered, as Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers.delegation_tokens import hmac_of, refusal
from floodmark.controller import TokenInfo
from floodmark.security import KafkaPrincipal
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


def owners_asked(req: WireRequest) -> list[KafkaPrincipal] | None:
    if req.owners is None:
        return None
    return [KafkaPrincipal(str(o.principal_type), str(o.principal_name)) for o in req.owners]


def describe_delegation_token(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                              conn: ClientConnection) -> WireResponse:
    error = refusal(ctx, conn)
    if error is not None:
        return {"error_code": int(error), "tokens": [], "throttle_time": 0}
    owners = owners_asked(req)
    tokens = [] if owners == [] else [
        described(ctx, t) for _, t in sorted(ctx.controller.delegation_token_infos().items())
        if owners is None or any(t.owner_or_renewer(o) for o in owners)]
    return {"error_code": 0, "tokens": tokens, "throttle_time": 0}


def described(ctx: HandlerContext, t: TokenInfo) -> WireResponse:
    return {"principal_type": t.owner.principal_type, "principal_name": t.owner.name,
            "token_requester_principal_type": t.requester.principal_type,
            "token_requester_principal_name": t.requester.name,
            "issue_timestamp": t.issue_ms, "expiry_timestamp": t.expiry_ms,
            "max_timestamp": t.max_ms, "token_id": t.token_id, "hmac": hmac_of(ctx, t),
            "renewers": [{"principal_type": r.principal_type, "principal_name": r.name}
                         for r in t.renewers]}
