"""Delegation tokens (KIP-48) at the wire on a real broker: create, describe, renew and expire
over SASL_PLAINTEXT (SCRAM-SHA-512 users), with Kafka's answers and errors; refused on a
PLAINTEXT listener (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) and without a secret key
(DELEGATION_TOKEN_AUTH_DISABLED). Kafka's own tools and a client logging in with a token:
tests/reference/test_delegation_tokens_on_floodmark.py."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.security.client_security import ClientSecurity
from floodmark.security.delegation_token import token_hmac
from floodmark.wire.codec import epoch_ms
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.integration

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
SECRET = "wire-secret-19"
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
E = ErrorCode


def _sasl_broker(root: Path, secret: str | None) -> BrokerProcess:
    return BrokerProcess(root / "data", [
        "--set", "listeners=SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=SASL:SASL_PLAINTEXT",
        "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "--set", "delegation.token.max.lifetime.ms=3600000",
        "--set", "delegation.token.expiry.time.ms=600000",
        *(["--set", f"delegation.token.secret.key={secret}"] if secret else []),
        *(a for user, password in PASSWORDS.items()
          for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")),
    ]).start()


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _sasl_broker(tmp_path_factory.mktemp("tokens-wire"), SECRET)
    try:
        yield b
    finally:
        b.stop()


def _as(b: BrokerProcess, user: str) -> KafkaConnection:
    return KafkaConnection(b.bootstrap, timeout_s=15, security=ClientSecurity.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user, "sasl.password": PASSWORDS[user]}))


def _refused(c: KafkaConnection, api_key: int, version: int, body: dict[str, Any]
             ) -> tuple[int, int | None]:
    """(error code, expiry or None) of an answer kio cannot decode: a refusal's times are -1,
    as Kafka's (``DelegationTokenManager.ErrorTimestamp``), which kio's reader refuses.
    Flexible versions only: the header is the correlation id and an empty tag buffer."""
    corr = c.send(api_key, version, body)
    size = struct.unpack(">i", bytes(c._read_exact(4)))[0]
    frame = bytes(c._read_exact(size))
    assert struct.unpack_from(">i", frame)[0] == corr and frame[4] == 0
    error = struct.unpack_from(">h", frame, 5)[0]
    if api_key in (RENEW, EXPIRE):
        return error, struct.unpack_from(">q", frame, 7)[0]
    return error, None


def _create_body(version: int = 3, owner: str | None = None,
                 renewers: tuple[str, ...] = ("bob",), lifetime_ms: int = -1
                 ) -> dict[str, Any]:
    body: dict[str, Any] = {"renewers": [{"principal_type": "User", "principal_name": r}
                                         for r in renewers], "max_lifetime": lifetime_ms}
    if version >= 3:
        body.update(owner_principal_type="User" if owner else None,
                    owner_principal_name=owner)
    return body


def _create(c: KafkaConnection, version: int = 3, renewers: tuple[str, ...] = ("bob",),
            lifetime_ms: int = -1) -> Any:
    return c.request(CREATE, version, _create_body(version, None, renewers, lifetime_ms))


def _describe(c: KafkaConnection, owners: list[str] | None) -> Any:
    return c.request(DESCRIBE, 3, {"owners": None if owners is None else [
        {"principal_type": "User", "principal_name": o} for o in owners]})


def test_create_describe_renew_expire(sasl: BrokerProcess) -> None:
    with _as(sasl, "alice") as alice, _as(sasl, "bob") as bob:
        before_ms = int(time.time() * 1000)
        made = _create(alice, lifetime_ms=1_800_000)
        assert int(made.error_code) == 0
        assert (made.principal_name, made.token_requester_principal_name) == ("alice", "alice")
        issue = epoch_ms(made.issue_timestamp)
        assert issue >= before_ms - 1000
        assert epoch_ms(made.max_timestamp) == issue + 1_800_000  # below the broker's max
        assert epoch_ms(made.expiry_timestamp) == issue + 600_000
        assert bytes(made.hmac) == token_hmac(made.token_id, SECRET)
        # every version answers
        for version in (1, 2):
            assert int(_create(alice, version).error_code) == 0
        # describe: by owner (alice's three), none for an empty owner list, bob sees them as
        # their renewer
        mine = _describe(alice, ["alice"])
        assert len(mine.tokens) == 3
        assert made.token_id in {t.token_id for t in mine.tokens}
        assert _describe(alice, []).tokens == ()
        assert {t.token_id for t in _describe(bob, None).tokens} == \
            {t.token_id for t in mine.tokens}
        token = next(t for t in mine.tokens if t.token_id == made.token_id)
        assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "bob")]
        assert bytes(token.hmac) == bytes(made.hmac)
        # renew by the renewer; a stranger's HMAC is not found
        renewed = bob.request(RENEW, 2, {"hmac": made.hmac, "renew_period": 60_000})
        assert int(renewed.error_code) == 0
        assert epoch_ms(renewed.expiry_timestamp) >= issue + 60_000
        assert _refused(bob, RENEW, 2, {"hmac": b"\0" * 64, "renew_period": 1}) == (
            E.DELEGATION_TOKEN_NOT_FOUND, -1)
        # bob's own token, which alice neither owns nor renews
        other = _create(bob, renewers=())
        assert _refused(alice, EXPIRE, 2, {"hmac": other.hmac, "expiry_time_period": -1}) == (
            E.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
        # expire at once: gone
        gone = alice.request(EXPIRE, 2, {"hmac": made.hmac, "expiry_time_period": -1})
        assert int(gone.error_code) == 0
        assert made.token_id not in {t.token_id for t in _describe(alice, ["alice"]).tokens}
        assert _refused(alice, RENEW, 2, {"hmac": made.hmac, "renew_period": 1}) == (
            E.DELEGATION_TOKEN_NOT_FOUND, -1)


def test_renewers_must_be_users(sasl: BrokerProcess) -> None:
    with _as(sasl, "alice") as alice:
        body = _create_body()
        body["renewers"] = [{"principal_type": "Group", "principal_name": "ops"}]
        assert _refused(alice, CREATE, 3, body) == (E.INVALID_PRINCIPAL_TYPE, None)


def test_refused_on_plaintext_and_without_a_secret(broker: Any, tmp_path: Path) -> None:
    with KafkaConnection(broker.bootstrap) as c:  # the session broker: PLAINTEXT
        assert _refused(c, CREATE, 3, _create_body()) == (
            E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, None)
        assert int(_describe(c, None).error_code) == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert _refused(c, RENEW, 2, {"hmac": b"x", "renew_period": 1}) == (
            E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    off = _sasl_broker(tmp_path, None)
    try:
        with _as(off, "alice") as alice:
            assert _refused(alice, CREATE, 3, _create_body()) == (
                E.DELEGATION_TOKEN_AUTH_DISABLED, None)
            assert int(_describe(alice, None).error_code) == E.DELEGATION_TOKEN_AUTH_DISABLED
    finally:
        off.stop()
