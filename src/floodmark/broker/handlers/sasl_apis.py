"""SaslHandshake (v0-1) and SaslAuthenticate (v0-2): the wire side of a connection's
``SaslSession`` (``floodmark.security.sasl.session``), which decides everything.

On a listener without SASL both answer ILLEGAL_SASL_STATE, as Kafka does once a connection is
authenticated (there is nothing to authenticate).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.errors import ErrorCode
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

log = logging.getLogger(__name__)


def sasl_handshake(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                   conn: ClientConnection) -> WireResponse:
    session = conn.sasl
    if session is None:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    answer = session.handshake(str(req.mechanism))
    if answer.log_line is not None:
        broker.authentication.failed(conn, answer.log_line)
    return {"error_code": int(answer.error), "mechanisms": list(answer.mechanisms)}


METADATA_WAIT_S = 30.0
"""How long an authentication waits for a starting broker's first metadata catch-up (its SCRAM
credentials) before it is decided on what the broker has."""


def sasl_authenticate(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                      conn: ClientConnection) -> WireResponse | Awaitable[WireResponse]:
    session = conn.sasl
    if session is None:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
                "error_message": f"SaslAuthenticate on {conn.security_protocol} listener "
                                 f"{conn.listener_name}: no SASL here"}
    return _after_metadata(broker, req, conn)


async def _after_metadata(broker: HandlerContext, req: WireRequest,
                          conn: ClientConnection) -> WireResponse:
    """A broker that has just started serves its listeners before it has read the metadata
    log: a SCRAM user it has not read yet would fail as a wrong password. Wait for the first
    catch-up (at once on a broker that has it)."""
    await broker.membership.metadata_ready(METADATA_WAIT_S)
    session = conn.sasl
    assert session is not None
    answer = session.authenticate(bytes(req.auth_bytes), broker.now_ms())
    if answer.principal is not None:
        conn.principal = answer.principal
        log.debug("%s authenticated as %s (%s) on listener %s", conn.peer, answer.principal,
                  session.mechanism, conn.listener_name)
    if answer.log_line is not None:
        broker.authentication.failed(conn, answer.log_line)
    return {"error_code": int(answer.error), "error_message": answer.error_message,
            "auth_bytes": answer.token, "session_lifetime": answer.session_lifetime_ms}
