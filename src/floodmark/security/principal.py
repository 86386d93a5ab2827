"""Kafka principals: ``User:alice``, ``User:ANONYMOUS`` (nobody has authenticated: a PLAINTEXT
listener), ``User:CN=broker-1,O=floodmark`` (an mTLS certificate before mapping rules).

A principal is fixed on the connection once authentication ends (TLS handshake, then SASL) and
carried in the request context to the authorizer; no handler decides who may call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    token_authenticated: bool = field(default=False, compare=False)
    """Authenticated with a delegation token (KIP-48): the principal is the token's owner, and
    the connection may not create, renew or expire tokens. Not part of equality, as Kafka's."""

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def parse_principal(text: str) -> KafkaPrincipal:
    """``Type:name`` as kafka-acls and ``super.users`` write it. Raises ValueError, one line."""
    principal_type, sep, name = text.partition(":")
    if not sep or not principal_type or not name:
        raise ValueError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
    return KafkaPrincipal(principal_type, name)
