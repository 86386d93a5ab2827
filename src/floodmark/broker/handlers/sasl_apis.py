"""SaslHandshake (v0-1) and SaslAuthenticate (v0-2): the wire side of a connection's
``SaslSession`` (``floodmark.security.sasl.session``), which decides everything.

On a listener without SASL both answer ILLEGAL_SASL_STATE, as Kafka does once a connection is
authenticated (there is nothing to authenticate).
"""

from __future__ import annotations

import logging
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


def sasl_authenticate(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                      conn: ClientConnection) -> WireResponse:
    """A starting broker answers this, like every request, only after its first metadata
    catch-up (``Broker.dispatch``): a SCRAM user it has not read yet would fail as a wrong
    password."""
    session = conn.sasl
    if session is None:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
                "error_message": f"SaslAuthenticate on {conn.security_protocol} listener "
                                 f"{conn.listener_name}: no SASL here"}
    answer = session.authenticate(bytes(req.auth_bytes), broker.now_ms())
    if answer.principal is not None:
        conn.principal = answer.principal
        log.debug("%s authenticated as %s (%s) on listener %s", conn.peer, answer.principal,
                  session.mechanism, conn.listener_name)
    if answer.log_line is not None:
        broker.authentication.failed(conn, answer.log_line)
    return {"error_code": int(answer.error), "error_message": answer.error_message,
            "auth_bytes": answer.token, "session_lifetime": answer.session_lifetime_ms}
