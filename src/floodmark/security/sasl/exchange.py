"""One SASL mechanism's server side, as the session drives it: a token in, one answer out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from floodmark.errors import FloodmarkError
from floodmark.security.principal import KafkaPrincipal


@dataclass(frozen=True, slots=True)
class Challenge:
    """Send ``token`` back; the client answers with another token."""

    token: bytes


@dataclass(frozen=True, slots=True)
class Success:
    """Authenticated as ``principal``; ``token`` is the mechanism's last message (SCRAM's
    server-final, b"" for PLAIN)."""

    principal: KafkaPrincipal
    token: bytes
    credential_expires_at_ms: int | None = None
    """When the credential itself expires (an OAUTHBEARER token's ``exp``); None: never."""


class AuthenticationFailed(FloodmarkError):  # Kafka's SaslAuthenticationException
    """The client failed to authenticate.

    ``message`` goes to the client in SaslAuthenticate's ``error_message`` (KIP-152): it says
    what failed, never whether the user exists. ``reason`` goes to the broker's log: one line,
    it may name the user, never a password, a proof or a key.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(reason)
        self.message = message
        self.reason = reason


class MechanismServer(Protocol):
    """The server side of one mechanism, for one exchange (a fresh one per authentication)."""

    @property
    def mechanism(self) -> str: ...

    def respond(self, token: bytes) -> Challenge | Success:
        """The answer to the client's next token; raises ``AuthenticationFailed``."""
        ...


def invalid_credentials(mechanism: str) -> str:
    """Kafka's client-facing message for a wrong password or an unknown user, alike."""
    return (f"Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism}")
