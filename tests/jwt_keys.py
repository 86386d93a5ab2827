"""Test keys and JWTs for OAUTHBEARER: an identity provider in a few lines (RSA and EC keys, a
JSON Web Key Set, tokens signed with them), built with ``cryptography``."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(n: int, size: int | None = None) -> str:
    return b64url(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


@dataclass
class SigningKey:
    kid: str
    private: Any  # RSAPrivateKey | EllipticCurvePrivateKey

    @classmethod
    def rsa(cls, kid: str) -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, ec.generate_private_key(ec.SECP256R1()))

    @property
    def alg(self) -> str:
        return "RS256" if isinstance(self.private, rsa.RSAPrivateKey) else "ES256"

    def jwk(self) -> dict[str, str]:
        pub = self.private.public_key().public_numbers()
        if isinstance(self.private, rsa.RSAPrivateKey):
            return {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                    "n": _int(pub.n), "e": _int(pub.e)}
        return {"kty": "EC", "kid": self.kid, "use": "sig", "crv": "P-256",
                "x": _int(pub.x, 32), "y": _int(pub.y, 32)}

    def token(self, claims: dict[str, Any], *, kid: str | None = "own", alg: str = "") -> str:
        """A signed JWT; ``kid``: the key's own id ("own"), another id, or None (no kid)."""
        header = {"alg": alg or self.alg, "typ": "JWT"}
        if kid is not None:
            header["kid"] = self.kid if kid == "own" else kid
        signing_input = (b64url(json.dumps(header).encode()) + "."
                         + b64url(json.dumps(claims).encode())).encode()
        if isinstance(self.private, rsa.RSAPrivateKey):
            sig = self.private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        else:
            r, s = utils.decode_dss_signature(
                self.private.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return signing_input.decode() + "." + b64url(sig)


def jwks(*keys: SigningKey) -> str:
    return json.dumps({"keys": [k.jwk() for k in keys]})


def claims(sub: str, lifetime_s: float = 300, **extra: Any) -> dict[str, Any]:
    now = time.time()
    return {"sub": sub, "iat": int(now), "exp": int(now + lifetime_s), **extra}


def unsecured(claims_: dict[str, Any]) -> str:
    return (b64url(json.dumps({"alg": "none"}).encode()) + "."
            + b64url(json.dumps(claims_).encode()) + ".")


def client_first(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()
