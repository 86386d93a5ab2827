"""Delegation tokens (KIP-48, APIs 38-41), one module per API; what they share is here: who may
ask at all (Kafka's ``allowTokenRequests``), whether tokens are on, the settings the controller
decides with, and finding a token by its HMAC (renew and expire name a token by it).

The rules live in ``controller/delegation_tokens.py`` (decided by the active controller, written
as metadata records every broker applies); the HMAC, which no record carries, is computed here
from the token id with ``delegation.token.secret.key`` (``security/delegation_token.py``).
"""

from __future__ import annotations

import datetime
import hmac as hmac_lib
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection
from floodmark.controller import TokenInfo, TokenSettings
from floodmark.errors import ErrorCode
from floodmark.security import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

NO_TIMESTAMP = -1
"""Kafka's ``DelegationTokenManager.ErrorTimestamp``: the times of a refused answer."""


def wire_time(time_ms: int) -> datetime.datetime:
    """A time for the answers' datetime fields, -1 included (the codec takes a negative
    number for a null, which these fields cannot be)."""
    return datetime.datetime.fromtimestamp(time_ms / 1000, tz=datetime.UTC)


def refusal(ctx: HandlerContext, conn: ClientConnection) -> ErrorCode | None:
    """DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a connection authenticated with a token, on a
    PLAINTEXT listener and on SSL without a client certificate (Kafka's
    ``allowTokenRequests``); then DELEGATION_TOKEN_AUTH_DISABLED without a secret key."""
    principal = conn.principal
    protocol = conn.security_protocol
    if principal.token_authenticated or protocol == "PLAINTEXT" or (
            protocol == "SSL" and principal == ANONYMOUS):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    if ctx.authentication.token_credentials is None:
        return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    return None


def requester(conn: ClientConnection) -> KafkaPrincipal:
    return KafkaPrincipal(conn.principal.principal_type, conn.principal.name)


def settings(ctx: HandlerContext) -> TokenSettings:
    return TokenSettings(ctx.config.get_int("delegation.token.max.lifetime.ms"),
                         ctx.config.get_int("delegation.token.expiry.time.ms"))


def hmac_of(ctx: HandlerContext, token: TokenInfo) -> bytes:
    credentials = ctx.authentication.token_credentials
    assert credentials is not None, "refusal() answered DELEGATION_TOKEN_AUTH_DISABLED"
    return credentials.hmac(token.token_id)


def token_by_hmac(ctx: HandlerContext, hmac: bytes) -> TokenInfo | None:
    """The token whose HMAC is ``hmac`` (None: none is)."""
    for token in ctx.controller.delegation_token_infos().values():
        if hmac_lib.compare_digest(hmac_of(ctx, token), hmac):
            return token
    return None
