"""A delegation token's secret side (KIP-48), as Kafka's ``DelegationTokenManager``: the HMAC of
the token id under ``delegation.token.secret.key`` (HmacSHA512), which is the token's password
(base64) for SCRAM with the ``tokenauth=true`` extension, and the SCRAM credentials made from it
(the mechanism's minimum iterations, 4096, as Kafka). Tokens are enabled only when the secret is
set. No secret or HMAC ever goes to a log line or a record."""

from __future__ import annotations

import base64
import hashlib
import hmac as hmac_lib
from dataclasses import dataclass, field

from floodmark.security.sasl.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_password,
)

SECRET_SETTING = "delegation.token.secret.key"
MAX_CACHED_CREDENTIALS = 10_000


def token_hmac(token_id: str, secret: str) -> bytes:
    """HmacSHA512(secret, token id), both UTF-8 (Kafka's ``createHmac``)."""
    return hmac_lib.new(secret.encode("utf-8"), token_id.encode("utf-8"),
                        hashlib.sha512).digest()


def token_password(hmac: bytes) -> str:
    """What a client authenticates with: the HMAC in base64 (Kafka's ``hmacAsBase64String``)."""
    return base64.b64encode(hmac).decode("ascii")


@dataclass
class TokenCredentials:
    """SCRAM credentials of tokens, made once per (token id, mechanism) and kept (PBKDF2 of
    4096 iterations is milliseconds of CPU: not at every authentication). Bounded: past
    ``MAX_CACHED_CREDENTIALS`` the oldest is dropped."""

    secret: str
    _cache: dict[tuple[str, ScramMechanism], ScramCredential] = field(default_factory=dict)

    def hmac(self, token_id: str) -> bytes:
        return token_hmac(token_id, self.secret)

    def credential(self, token_id: str, mechanism: ScramMechanism) -> ScramCredential:
        key = (token_id, mechanism)
        cred = self._cache.get(key)
        if cred is None:
            if len(self._cache) >= MAX_CACHED_CREDENTIALS:
                del self._cache[next(iter(self._cache))]
            cred = credential_from_password(mechanism, token_password(self.hmac(token_id)),
                                            MIN_ITERATIONS)
            self._cache[key] = cred
        return cred

    def __repr__(self) -> str:  # the secret stays out of logs and tracebacks
        return f"TokenCredentials({len(self._cache)} cached)"
