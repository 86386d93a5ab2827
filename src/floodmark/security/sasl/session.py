"""One connection's SASL authenticator: a state machine the broker drives (sans I/O).

=================  ==================================  ========================================
state              requests admitted                   what moves it on
=================  ==================================  ========================================
HANDSHAKE          ApiVersions, SaslHandshake          SaslHandshake of an enabled mechanism
AUTHENTICATE       ApiVersions, SaslAuthenticate       the mechanism's success -> AUTHENTICATED
AUTHENTICATED      every request while the session     SaslHandshake (KIP-368 re-authentication)
                   lasts; once it expired (``connec-    -> REAUTHENTICATE
                   tions.max.reauth.ms``), only a new
                   SaslHandshake
REAUTHENTICATE     SaslAuthenticate; others under the  success as the same principal ->
                   current principal until it expires  AUTHENTICATED with a new expiry
FAILED             nothing (requests are dropped)      the broker closes the connection after
                                                       ``connection.failed.authentication.delay.ms``
=================  ==================================  ========================================

Any other request closes the connection (Kafka's behaviour: the client is not speaking SASL).
Any failure (a mechanism that is not enabled, a refused token, a request out of order, a
different principal or mechanism on re-authentication) moves to FAILED: the answer carries the
error for the client (KIP-152) and one line for the log.

SaslHandshake v0's raw-token mode (tokens without a Kafka header) is not served: every client
floodmark is tested with uses SaslAuthenticate (handshake v1); a v0 client's raw token does not
parse as a request and the connection closes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from floodmark.errors import ErrorCode
from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import (
    AuthenticationFailed,
    Challenge,
    MechanismServer,
)

# Kafka's API keys that take part in authentication (the wire layer's ApiKey has the same
# numbers; security sits beside wire and does not import it).
SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
_NAMES = {SASL_HANDSHAKE: "SaslHandshake", API_VERSIONS: "ApiVersions",
          SASL_AUTHENTICATE: "SaslAuthenticate"}


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    REAUTHENTICATE = "reauthenticate"
    FAILED = "failed"


class Verdict(enum.Enum):
    SERVE = "serve"
    IGNORE = "ignore"  # after a failure, until the delayed close
    CLOSE = "close"


@dataclass(frozen=True, slots=True)
class Admission:
    verdict: Verdict
    reason: str = ""


SERVE = Admission(Verdict.SERVE)
IGNORE = Admission(Verdict.IGNORE)


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A SASL listener's settings (Kafka's names in the docstrings)."""

    enabled_mechanisms: tuple[str, ...]
    """``sasl.enabled.mechanisms`` (or ``listener.name.<l>.sasl.enabled.mechanisms``)."""
    max_reauth_ms: int = 0
    """``connections.max.reauth.ms``: 0 = a session never expires."""
    max_receive_bytes: int = 524_288
    """``sasl.server.max.receive.size``: the largest request before authentication."""


@dataclass(frozen=True, slots=True)
class HandshakeAnswer:
    error: ErrorCode
    mechanisms: tuple[str, ...]
    log_line: str | None = None
    """Why it failed, for the broker's log (None when it did not)."""


@dataclass(frozen=True, slots=True)
class AuthenticateAnswer:
    error: ErrorCode
    error_message: str | None = None
    token: bytes = b""
    session_lifetime_ms: int = 0
    log_line: str | None = None
    """Why it failed, for the broker's log (None when it did not)."""
    principal: KafkaPrincipal | None = None
    """Set when this answer completes an authentication."""


MechanismFactory = Callable[[str], MechanismServer]
"""A fresh server side of the named (enabled) mechanism, for one exchange."""


class SaslSession:
    def __init__(self, settings: SaslSettings, servers: MechanismFactory) -> None:
        self.settings = settings
        self._servers = servers
        self.state = SaslState.HANDSHAKE
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.expires_at_ms: int | None = None
        self._exchange: MechanismServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state in (SaslState.AUTHENTICATED, SaslState.REAUTHENTICATE)

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_ms is not None and now_ms >= self.expires_at_ms

    def max_frame_bytes(self, max_request_bytes: int) -> int:
        """The largest request this connection may send now."""
        if self.authenticated:
            return max_request_bytes
        return min(max_request_bytes, self.settings.max_receive_bytes)

    # -- which requests pass ---------------------------------------------------------------
    def admits(self, api_key: int, frame_bytes: int, now_ms: int) -> Admission:
        state = self.state
        if state is SaslState.FAILED:
            return IGNORE
        if state is SaslState.AUTHENTICATED:
            if api_key == SASL_HANDSHAKE or not self.expired(now_ms):
                return SERVE
            return Admission(Verdict.CLOSE, f"SASL session of {self.principal} expired "
                             f"(connections.max.reauth.ms={self.settings.max_reauth_ms}) and "
                             f"it did not re-authenticate")
        if state is SaslState.REAUTHENTICATE:
            if api_key == SASL_AUTHENTICATE or not self.expired(now_ms):
                return SERVE
            return Admission(Verdict.CLOSE, f"SASL session of {self.principal} expired during "
                             f"re-authentication")
        if frame_bytes > self.settings.max_receive_bytes:
            return Admission(Verdict.CLOSE, f"request of {frame_bytes} bytes before SASL "
                             f"authentication exceeds sasl.server.max.receive.size="
                             f"{self.settings.max_receive_bytes}")
        expected = SASL_HANDSHAKE if state is SaslState.HANDSHAKE else SASL_AUTHENTICATE
        if api_key in (expected, API_VERSIONS):
            return SERVE
        return Admission(Verdict.CLOSE, f"unexpected request (api_key {api_key}) before SASL "
                         f"authentication: {_NAMES[expected]} expected")

    # -- SaslHandshake -----------------------------------------------------------------------
    def handshake(self, mechanism: str) -> HandshakeAnswer:
        enabled = self.settings.enabled_mechanisms
        if self.state not in (SaslState.HANDSHAKE, SaslState.AUTHENTICATED):
            return self._handshake_failed(ErrorCode.ILLEGAL_SASL_STATE,
                                          f"SaslHandshake in state {self.state.value}")
        if mechanism not in enabled:
            return self._handshake_failed(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"SASL mechanism {mechanism[:64]!r} is not enabled (enabled: "
                f"{', '.join(enabled)})")
        if self.state is SaslState.AUTHENTICATED:
            if mechanism != self.mechanism:
                return self._handshake_failed(
                    ErrorCode.ILLEGAL_SASL_STATE,
                    f"SASL mechanism changed during re-authentication of {self.principal} "
                    f"from {self.mechanism} to {mechanism}")
            self.state = SaslState.REAUTHENTICATE
        else:
            self.state = SaslState.AUTHENTICATE
            self.mechanism = mechanism
        self._exchange = self._servers(mechanism)
        return HandshakeAnswer(ErrorCode.NONE, enabled)

    def _handshake_failed(self, error: ErrorCode, why: str) -> HandshakeAnswer:
        self.state = SaslState.FAILED
        self._exchange = None
        return HandshakeAnswer(error, self.settings.enabled_mechanisms, why)

    # -- SaslAuthenticate --------------------------------------------------------------------
    def authenticate(self, token: bytes, now_ms: int) -> AuthenticateAnswer:
        exchange = self._exchange
        if exchange is None or self.state not in (SaslState.AUTHENTICATE,
                                                  SaslState.REAUTHENTICATE):
            return self._failed(ErrorCode.ILLEGAL_SASL_STATE,
                                "Unexpected SaslAuthenticate request: SaslHandshake first",
                                f"SaslAuthenticate in state {self.state.value}")
        try:
            step = exchange.respond(token)
        except AuthenticationFailed as exc:
            return self._failed(ErrorCode.SASL_AUTHENTICATION_FAILED, exc.message, exc.reason)
        if isinstance(step, Challenge):
            return AuthenticateAnswer(ErrorCode.NONE, None, step.token)
        if self.state is SaslState.REAUTHENTICATE and step.principal != self.principal:
            return self._failed(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot change principals during re-authentication from {self.principal}: "
                f"{step.principal}",
                f"re-authentication of {self.principal} as {step.principal} refused")
        self.state = SaslState.AUTHENTICATED
        self.principal = step.principal
        self._exchange = None
        lifetime_ms = self.settings.max_reauth_ms
        if lifetime_ms > 0 and step.credential_expires_at_ms is not None:
            # KIP-368: the session ends when the credential does (a token's expiry), if sooner.
            lifetime_ms = max(1, min(lifetime_ms, step.credential_expires_at_ms - now_ms))
        self.expires_at_ms = now_ms + lifetime_ms if lifetime_ms > 0 else None
        return AuthenticateAnswer(ErrorCode.NONE, None, step.token, lifetime_ms,
                                  principal=step.principal)

    def _failed(self, error: ErrorCode, message: str, why: str) -> AuthenticateAnswer:
        self.state = SaslState.FAILED
        self._exchange = None
        return AuthenticateAnswer(error, message, log_line=why)
