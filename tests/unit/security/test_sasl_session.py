"""security/sasl/session: one connection's authenticator, driven as the broker drives it."""

from __future__ import annotations

import pytest

from floodmark.errors import ErrorCode
from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import MechanismServer
from floodmark.security.sasl.plain import PlainServer, parse_plain_users
from floodmark.security.sasl.session import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SaslSession,
    SaslSettings,
    SaslState,
    Verdict,
)

PRODUCE = 0
USERS = parse_plain_users("alice:a-pw\nbob:b-pw\n")


def servers(name: str) -> MechanismServer:
    assert name == "PLAIN"
    return PlainServer(USERS)


def session(max_reauth_ms: int = 0) -> SaslSession:
    return SaslSession(SaslSettings(("PLAIN",), max_reauth_ms, max_receive_bytes=1000), servers)


def test_before_authentication_only_the_exchange_passes() -> None:
    s = session()
    assert s.admits(API_VERSIONS, 20, 0).verdict is Verdict.SERVE
    assert s.admits(SASL_HANDSHAKE, 20, 0).verdict is Verdict.SERVE
    for key in (PRODUCE, 3, SASL_AUTHENTICATE):
        refused = s.admits(key, 20, 0)
        assert refused.verdict is Verdict.CLOSE and "SaslHandshake expected" in refused.reason
    assert s.handshake("PLAIN").error is ErrorCode.NONE
    assert s.admits(SASL_AUTHENTICATE, 20, 0).verdict is Verdict.SERVE
    assert s.admits(PRODUCE, 20, 0).verdict is Verdict.CLOSE
    assert s.admits(SASL_AUTHENTICATE, 1001, 0).verdict is Verdict.CLOSE  # oversized token
    assert s.max_frame_bytes(10**8) == 1000


def test_success_sets_the_principal_and_admits_everything() -> None:
    s = session()
    s.handshake("PLAIN")
    answer = s.authenticate(b"\0alice\0a-pw", 0)
    assert answer.error is ErrorCode.NONE and answer.principal == KafkaPrincipal.user("alice")
    assert answer.session_lifetime_ms == 0 and s.expires_at_ms is None
    assert s.authenticated and s.admits(PRODUCE, 10**6, 10**12).verdict is Verdict.SERVE
    assert s.max_frame_bytes(10**8) == 10**8


def test_failure_answers_kip152_then_drops_everything() -> None:
    s = session()
    s.handshake("PLAIN")
    answer = s.authenticate(b"\0alice\0nope", 0)
    assert answer.error is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message is not None and "invalid credentials" in answer.error_message
    assert answer.log_line is not None and "nope" not in answer.log_line
    assert s.state is SaslState.FAILED and s.principal is None
    for key in (PRODUCE, SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS):
        assert s.admits(key, 10, 0).verdict is Verdict.IGNORE


def test_a_mechanism_not_enabled_is_refused_with_the_list() -> None:
    s = session()
    answer = s.handshake("SCRAM-SHA-512")
    assert answer.error is ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ("PLAIN",) and s.state is SaslState.FAILED


def test_out_of_order_handshake_and_authenticate_are_illegal_states() -> None:
    s = session()
    assert s.authenticate(b"x", 0).error is ErrorCode.ILLEGAL_SASL_STATE
    s = session()
    s.handshake("PLAIN")
    assert s.handshake("PLAIN").error is ErrorCode.ILLEGAL_SASL_STATE


def test_kip368_session_expiry_and_reauthentication() -> None:
    s = session(max_reauth_ms=1000)
    s.handshake("PLAIN")
    answer = s.authenticate(b"\0alice\0a-pw", 5000)
    assert answer.session_lifetime_ms == 1000 and s.expires_at_ms == 6000
    assert s.admits(PRODUCE, 10, 5999).verdict is Verdict.SERVE
    expired = s.admits(PRODUCE, 10, 6000)
    assert expired.verdict is Verdict.CLOSE and "expired" in expired.reason
    # re-authentication: a new handshake is admitted even after expiry
    assert s.admits(SASL_HANDSHAKE, 10, 6500).verdict is Verdict.SERVE
    assert s.handshake("PLAIN").error is ErrorCode.NONE and s.state is SaslState.REAUTHENTICATE
    assert s.admits(SASL_AUTHENTICATE, 10, 6500).verdict is Verdict.SERVE
    assert s.admits(PRODUCE, 10, 6500).verdict is Verdict.CLOSE  # still expired
    again = s.authenticate(b"\0alice\0a-pw", 6500)
    assert again.error is ErrorCode.NONE and s.expires_at_ms == 7500
    assert s.admits(PRODUCE, 10, 7000).verdict is Verdict.SERVE


def test_reauthentication_as_someone_else_fails() -> None:
    s = session(max_reauth_ms=1000)
    s.handshake("PLAIN")
    s.authenticate(b"\0alice\0a-pw", 0)
    s.handshake("PLAIN")
    answer = s.authenticate(b"\0bob\0b-pw", 10)
    assert answer.error is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message is not None and "Cannot change principals" in \
        answer.error_message
    assert s.state is SaslState.FAILED


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_reauthentication_keeps_the_mechanism(mechanism: str) -> None:
    s = SaslSession(SaslSettings(("PLAIN", "SCRAM-SHA-256")), servers)
    s.handshake("PLAIN")
    s.authenticate(b"\0alice\0a-pw", 0)
    if mechanism == "PLAIN":
        assert s.handshake(mechanism).error is ErrorCode.NONE
    else:
        assert s.handshake(mechanism).error is ErrorCode.ILLEGAL_SASL_STATE
