"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with JWT validation as Kafka's KIP-768 validator does it.

The client's first message is ``n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01``.
The token is a JWT (RFC 7519) in compact form, ``header.payload.signature``. It is accepted when:

- its signature verifies with a key of the JSON Web Key Set the broker trusts
  (``sasl.oauthbearer.jwks.endpoint.url``: a file or an HTTP(S) URL, read by the broker; the key
  is the one named by the header's ``kid``, or the set's only key), with RS256/RS384/RS512,
  PS256/PS384/PS512 or ES256/ES384/ES512 (``alg: none`` only under the unsafe setting below);
- ``exp`` is a number and not in the past, ``nbf``/``iat`` (when present) not in the future, each
  with ``sasl.oauthbearer.clock.skew.seconds`` of tolerance;
- the subject claim (``sasl.oauthbearer.sub.claim.name``, default ``sub``) is a non-empty
  string: it becomes the principal ``User:<sub>``;
- ``aud`` holds one of ``sasl.oauthbearer.expected.audience`` (when set) and ``iss`` equals
  ``sasl.oauthbearer.expected.issuer`` (when set);
- an authorization id, when given, equals the subject.

A refused token gets RFC 7628's error challenge (``{"status": "invalid_token"}``); the client
answers it with a lone ``\\x01`` and the exchange then fails with a message saying why (KIP-152).
The session lasts until the token expires when ``connections.max.reauth.ms`` is set (KIP-368:
the client re-authenticates with a fresh token), as Kafka does.

Unsecured tokens (``alg: none``, librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt``) are what
Kafka's default validator accepts; floodmark accepts them only with
``floodmark.unsafe.sasl.oauthbearer.unsecured.jwt=true`` (for tests and laptops: anyone can
claim any name).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.errors import FloodmarkError
from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import AuthenticationFailed, Challenge, Success

OAUTHBEARER = "OAUTHBEARER"
UNSECURED_SETTING = "floodmark.unsafe.sasl.oauthbearer.unsecured.jwt"
MAX_TOKEN_BYTES = 16_384
_KVSEP = b"\x01"
_AUTH = re.compile(r"^Bearer +([A-Za-z0-9\-._~+/]+=*)$")
_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}


@dataclass(frozen=True)
class OAuthSettings:
    """The validator's settings (Kafka's names)."""

    expected_audience: tuple[str, ...] = ()
    """``sasl.oauthbearer.expected.audience`` (empty: any)."""
    expected_issuer: str = ""
    """``sasl.oauthbearer.expected.issuer`` (empty: any)."""
    sub_claim_name: str = "sub"
    """``sasl.oauthbearer.sub.claim.name``."""
    scope_claim_name: str = "scope"
    """``sasl.oauthbearer.scope.claim.name`` (read, shown in the log; not enforced)."""
    clock_skew_ms: int = 30_000
    """``sasl.oauthbearer.clock.skew.seconds`` in ms."""
    allow_unsecured: bool = False
    """``floodmark.unsafe.sasl.oauthbearer.unsecured.jwt``."""


# -- JSON Web Keys ---------------------------------------------------------------------------


def _b64url(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_\-]*", text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url_int(text: object) -> int:
    if not isinstance(text, str) or not text:
        raise ValueError("a key parameter is not base64url text")
    return int.from_bytes(_b64url(text), "big")


@dataclass(frozen=True)
class JsonWebKey:
    kid: str | None
    kty: str
    public_key: Any  # cryptography's RSAPublicKey / EllipticCurvePublicKey


def parse_jwks(text: str, source: str) -> tuple[JsonWebKey, ...]:
    """The signing keys of a JWKS document (RFC 7517): RSA and EC (P-256/384/521) public keys;
    keys for encryption only (``use: enc``) and of other types are skipped. ValueError (one
    line naming ``source``) when the document is not a key set or holds no usable key."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON ({exc})") from None
    entries = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f'{source}: not a JSON Web Key Set ({{"keys": [...]}})')
    curves: dict[str, ec.EllipticCurve] = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(),
                                           "P-521": ec.SECP521R1()}
    keys: list[JsonWebKey] = []
    for i, k in enumerate(entries):
        if not isinstance(k, dict) or k.get("use", "sig") != "sig":
            continue
        kid = k.get("kid") if isinstance(k.get("kid"), str) else None
        try:
            if k.get("kty") == "RSA":
                key: Any = rsa.RSAPublicNumbers(_b64url_int(k.get("e")),
                                                _b64url_int(k.get("n"))).public_key()
            elif k.get("kty") == "EC" and k.get("crv") in curves:
                key = ec.EllipticCurvePublicNumbers(
                    _b64url_int(k.get("x")), _b64url_int(k.get("y")),
                    curves[str(k["crv"])]).public_key()
            else:
                continue
        except ValueError as exc:
            raise ValueError(f"{source}: keys[{i}] is not a valid public key ({exc})") from None
        keys.append(JsonWebKey(kid, str(k["kty"]), key))
    if not keys:
        raise ValueError(f"{source}: no RSA or EC signing key in the key set")
    return tuple(keys)


# -- tokens ------------------------------------------------------------------------------------


class InvalidToken(FloodmarkError):
    """Why a token is refused (for the client's message and the log; never the token)."""


def _verify_signature(alg: str, key: JsonWebKey, signing_input: bytes, signature: bytes) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, utils

    family, bits = alg[:2], alg[2:]
    if bits not in _HASHES or family not in ("RS", "PS", "ES"):
        raise InvalidToken(f"signature algorithm {alg[:16]!r} is not accepted")
    hash_alg: hashes.HashAlgorithm = getattr(hashes, _HASHES[bits])()
    try:
        if family in ("RS", "PS"):
            if key.kty != "RSA":
                raise InvalidToken(f"key {key.kid} is not an RSA key ({alg})")
            pad: padding.AsymmetricPadding = (
                padding.PKCS1v15() if family == "RS"
                else padding.PSS(mgf=padding.MGF1(hash_alg), salt_length=hash_alg.digest_size))
            key.public_key.verify(signature, signing_input, pad, hash_alg)
        else:
            if key.kty != "EC":
                raise InvalidToken(f"key {key.kid} is not an EC key ({alg})")
            half = len(signature) // 2
            if len(signature) % 2 or half == 0:
                raise InvalidToken("malformed ECDSA signature")
            der = utils.encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                             int.from_bytes(signature[half:], "big"))
            key.public_key.verify(der, signing_input, ec.ECDSA(hash_alg))
    except InvalidSignature:
        raise InvalidToken("the token's signature does not verify") from None


def _numeric(claims: Mapping[str, Any], name: str, required: bool) -> int | None:
    value = claims.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"claim {name!r} is {'missing' if value is None else 'not a number'}")
    return int(value * 1000)


@dataclass(frozen=True)
class ValidToken:
    principal_name: str
    expires_at_ms: int
    scope: tuple[str, ...]


def validate_token(token: str, keys: Sequence[JsonWebKey], settings: OAuthSettings,
                   now_ms: int) -> ValidToken:
    """The token's subject and expiry, or InvalidToken saying why."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("the token is not a JWT (header.payload.signature)")
    try:
        header = json.loads(_b64url(parts[0]))
        claims = json.loads(_b64url(parts[1]))
        signature = _b64url(parts[2])
    except (ValueError, binascii.Error):
        raise InvalidToken("the token's header, payload or signature is not base64url "
                           "JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("the token's header or payload is not a JSON object")
    alg = header.get("alg")
    if not isinstance(alg, str):
        raise InvalidToken("the token's header has no 'alg'")
    if alg == "none":
        if not settings.allow_unsecured:
            raise InvalidToken(f"unsecured tokens (alg none) are refused ({UNSECURED_SETTING})")
        if signature:
            raise InvalidToken("an unsecured token carries a signature")
    else:
        kid = header.get("kid")
        candidates = [k for k in keys if kid is None or k.kid == kid]
        if kid is None and len(keys) > 1:
            raise InvalidToken("the token names no key ('kid') and the key set has several")
        if not candidates:
            raise InvalidToken(f"no key {str(kid)[:64]!r} in the key set")
        _verify_signature(alg, candidates[0], f"{parts[0]}.{parts[1]}".encode(), signature)
    skew = settings.clock_skew_ms
    exp = _numeric(claims, "exp", required=True)
    assert exp is not None
    if exp + skew <= now_ms:
        raise InvalidToken("the token has expired")
    for name in ("nbf", "iat"):
        at = _numeric(claims, name, required=False)
        if at is not None and at - skew > now_ms:
            raise InvalidToken(f"the token's {name!r} is in the future")
    subject = claims.get(settings.sub_claim_name)
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidToken(f"the token has no subject claim {settings.sub_claim_name!r}")
    if settings.expected_issuer and claims.get("iss") != settings.expected_issuer:
        raise InvalidToken("the token's issuer ('iss') is not the expected one")
    if settings.expected_audience:
        aud = claims.get("aud")
        audience = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in settings.expected_audience for a in audience):
            raise InvalidToken("the token's audience ('aud') is not an expected one")
    scope = claims.get(settings.scope_claim_name)
    scopes = (tuple(scope.split()) if isinstance(scope, str)
              else tuple(str(s) for s in scope) if isinstance(scope, list) else ())
    return ValidToken(subject, exp, scopes)


def parse_client_first(message: bytes) -> tuple[str, str | None, dict[str, str]]:
    """(token, authorization id or None, extensions) of RFC 7628's client first message;
    InvalidToken when it is malformed."""
    if len(message) > MAX_TOKEN_BYTES:
        raise InvalidToken(f"the OAUTHBEARER message is over {MAX_TOKEN_BYTES} bytes")
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidToken("the OAUTHBEARER message is not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not rest.endswith("\x01\x01"):
        raise InvalidToken("the OAUTHBEARER message is not RFC 7628's client first message")
    gs2_parts = gs2.split(",")
    if len(gs2_parts) != 3 or gs2_parts[0] not in ("n", "y") or gs2_parts[2]:
        raise InvalidToken("the OAUTHBEARER message's GS2 header is malformed")
    authzid = None
    if gs2_parts[1]:
        if not gs2_parts[1].startswith("a="):
            raise InvalidToken("the OAUTHBEARER message's GS2 header is malformed")
        authzid = gs2_parts[1][2:]
    pairs: dict[str, str] = {}
    for item in rest[:-2].split("\x01"):
        key, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z]+", key) or key in pairs:
            raise InvalidToken("the OAUTHBEARER message's key=value pairs are malformed")
        pairs[key] = value
    match = _AUTH.match(pairs.pop("auth", ""))
    if match is None:
        raise InvalidToken("the OAUTHBEARER message has no 'auth=Bearer <token>'")
    return match.group(1), authzid, pairs


class OAuthBearerServer:
    """One OAUTHBEARER exchange. ``keys``: the trusted key set now (it may be refreshed between
    exchanges); ``now_ms`` is read when the client's message arrives."""

    mechanism = OAUTHBEARER

    def __init__(self, keys: Sequence[JsonWebKey], settings: OAuthSettings,
                 now_ms: int) -> None:
        self._keys = keys
        self._settings = settings
        self._now_ms = now_ms
        self._refused: str | None = None
        self._done = False

    def respond(self, token: bytes) -> Challenge | Success:
        if self._refused is not None:  # the client's answer to the error challenge
            why, self._refused = self._refused, None
            self._done = True
            raise AuthenticationFailed(f"Authentication failed: {why}", f"invalid token: {why}")
        if self._done:
            raise AuthenticationFailed("Authentication failed: OAUTHBEARER exchange is over",
                                       "an OAUTHBEARER message after the exchange ended")
        try:
            jwt, authzid, _extensions = parse_client_first(token)
            valid = validate_token(jwt, self._keys, self._settings, self._now_ms)
            if authzid and authzid != valid.principal_name:
                raise InvalidToken("the authorization id is not the token's subject")
        except InvalidToken as exc:
            self._refused = str(exc)
            return Challenge(json.dumps({"status": "invalid_token"}).encode())
        self._done = True
        return Success(KafkaPrincipal.user(valid.principal_name), b"",
                       credential_expires_at_ms=valid.expires_at_ms)
