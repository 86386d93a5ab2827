"""OAUTHBEARER's server side (pure): RFC 7628's client message, JWT signature and claim checks
as Kafka's KIP-768 validator makes them, the error challenge, and the session lifetime bounded
by the token's expiry (KIP-368)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from tests.jwt_keys import SigningKey, claims, client_first, jwks, unsecured

from floodmark.errors import ErrorCode
from floodmark.security.sasl.exchange import AuthenticationFailed, Challenge, Success
from floodmark.security.sasl.oauthbearer import (
    InvalidToken,
    OAuthBearerServer,
    OAuthSettings,
    parse_client_first,
    parse_jwks,
    validate_token,
)
from floodmark.security.sasl.session import SaslSession, SaslSettings

RSA = SigningKey.rsa("rsa-1")
EC = SigningKey.ec("ec-1")
OTHER = SigningKey.rsa("rsa-1")  # same kid, another key: a forger
KEYS = parse_jwks(jwks(RSA, EC), "test")


def now_ms() -> int:
    """Now, read when a test runs (tokens are made with the clock of that moment)."""
    return int(time.time() * 1000)


def test_signed_tokens_are_accepted_and_name_their_subject() -> None:
    for key in (RSA, EC):
        valid = validate_token(key.token(claims("alice", scope="a b")), KEYS, OAuthSettings(),
                               now_ms())
        assert valid.principal_name == "alice" and valid.scope == ("a", "b")
        assert valid.expires_at_ms > now_ms()


# Tokens are made when each test runs (collection can precede a run by many minutes).
BAD_TOKENS: list[tuple[Callable[[], str], str]] = [
    (lambda: OTHER.token(claims("alice")), "signature does not verify"),
    (lambda: RSA.token(claims("alice"), kid="nope"), "no key 'nope'"),
    (lambda: RSA.token(claims("alice"), kid=None), "names no key"),
    (lambda: RSA.token(claims("alice", lifetime_s=-120)), "expired"),
    (lambda: RSA.token({"sub": "alice"}), "'exp' is missing"),
    (lambda: RSA.token(claims("alice", nbf=time.time() + 600)), "'nbf' is in the future"),
    (lambda: RSA.token(claims("")), "no subject claim"),
    (lambda: RSA.token(claims("alice"), alg="HS256"), "not accepted"),
    (lambda: RSA.token(claims("alice"), alg="ES256"), "not an EC key"),
    (lambda: unsecured(claims("alice")), "unsecured tokens"),
    (lambda: "a.b", "not a JWT"),
    (lambda: "!!.e30.", "not base64url"),
]


@pytest.mark.parametrize("make, why", BAD_TOKENS, ids=[w for _m, w in BAD_TOKENS])
def test_bad_tokens_are_refused_with_a_reason(make: Callable[[], str], why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        validate_token(make(), KEYS, OAuthSettings(), now_ms())


def test_audience_issuer_skew_and_unsecured_setting() -> None:
    s = OAuthSettings(expected_audience=("kafka",), expected_issuer="https://idp")
    ok = claims("alice", aud=["other", "kafka"], iss="https://idp")
    assert validate_token(RSA.token(ok), KEYS, s, now_ms()).principal_name == "alice"
    with pytest.raises(InvalidToken, match="audience"):
        validate_token(RSA.token({**ok, "aud": "other"}), KEYS, s, now_ms())
    with pytest.raises(InvalidToken, match="issuer"):
        validate_token(RSA.token({**ok, "iss": "https://evil"}), KEYS, s, now_ms())
    just_expired = RSA.token(claims("alice", lifetime_s=-10))
    assert validate_token(just_expired, KEYS, OAuthSettings(clock_skew_ms=30_000), now_ms())
    with pytest.raises(InvalidToken):
        validate_token(just_expired, KEYS, OAuthSettings(clock_skew_ms=0), now_ms())
    assert validate_token(unsecured(claims("bob")), (),
                          OAuthSettings(allow_unsecured=True), now_ms()).principal_name == "bob"
    sub = OAuthSettings(sub_claim_name="client_id")
    assert validate_token(RSA.token(claims("x", client_id="svc")), KEYS, sub,
                          now_ms()).principal_name == "svc"


def test_client_first_message() -> None:
    assert parse_client_first(client_first("abc.def.ghi")) == ("abc.def.ghi", None, {})
    assert parse_client_first(b"n,a=alice,\x01host=h\x01auth=Bearer t.u.v\x01\x01") == (
        "t.u.v", "alice", {"host": "h"})
    for bad in (b"", b"n,,\x01auth=Bearer x\x01", b"p,,\x01auth=Bearer x\x01\x01",
                b"n,,\x01auth=Basic x\x01\x01", b"n,,\x01host=h\x01\x01", b"\xff\x01\x01\x01"):
        with pytest.raises(InvalidToken):
            parse_client_first(bad)


def test_the_exchange_challenges_then_fails_with_the_reason() -> None:
    server = OAuthBearerServer(KEYS, OAuthSettings(), now_ms())
    step = server.respond(client_first(OTHER.token(claims("mallory"))))
    assert isinstance(step, Challenge) and json.loads(step.token) == {"status": "invalid_token"}
    with pytest.raises(AuthenticationFailed, match="signature does not verify") as failed:
        server.respond(b"\x01")
    assert "ey" not in failed.value.reason  # never the token in the log
    server = OAuthBearerServer(KEYS, OAuthSettings(), now_ms())
    done = server.respond(client_first(RSA.token(claims("alice")), authzid="alice"))
    assert isinstance(done, Success) and str(done.principal) == "User:alice"
    server = OAuthBearerServer(KEYS, OAuthSettings(), now_ms())
    assert isinstance(server.respond(client_first(RSA.token(claims("alice")), "root")),
                      Challenge)


def test_session_lasts_until_the_token_expires_and_reauth_keeps_the_principal() -> None:
    now_ms = int(time.time() * 1000)
    session = SaslSession(SaslSettings(("OAUTHBEARER",), max_reauth_ms=3_600_000),
                          lambda m: OAuthBearerServer(KEYS, OAuthSettings(), now_ms))
    assert session.handshake("OAUTHBEARER").error is ErrorCode.NONE
    answer = session.authenticate(client_first(RSA.token(claims("alice", lifetime_s=60))),
                                  now_ms)
    assert answer.error is ErrorCode.NONE
    assert 50_000 < answer.session_lifetime_ms <= 61_000  # the token's, not the hour
    assert session.handshake("OAUTHBEARER").error is ErrorCode.NONE  # KIP-368
    again = session.authenticate(client_first(EC.token(claims("bob"))), now_ms)
    assert again.error is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in (again.error_message or "")


def test_key_sets() -> None:
    assert [k.kid for k in KEYS] == ["rsa-1", "ec-1"]
    for doc, why in [("x", "not JSON"), ("[]", "not a JSON Web Key Set"),
                     ('{"keys": [{"kty": "oct", "k": "abc"}]}', "no RSA or EC"),
                     ('{"keys": [{"kty": "RSA", "n": "", "e": "AQAB"}]}', "not a valid")]:
        with pytest.raises(ValueError, match=why):
            parse_jwks(doc, "f")
