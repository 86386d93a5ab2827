"""A delegation token's secret side and SCRAM with the ``tokenauth=true`` extension: the HMAC is
HmacSHA512 (RFC 4231's vector), a client that signs its client-first-bare with the extension in
it (as Kafka's ScramSaslClient does) authenticates as the token's owner, flagged
token-authenticated; a wrong HMAC, an unknown or expired token (the lookup answers None) and an
unsupported extension are refused."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from floodmark.security.delegation_token import TokenCredentials, token_hmac, token_password
from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import AuthenticationFailed, Challenge, Success
from floodmark.security.sasl.scram import ScramCredential, ScramMechanism, ScramServer

SHA256 = ScramMechanism.SCRAM_SHA_256
OWNER = KafkaPrincipal.user("alice")


def test_hmac_is_hmac_sha512_of_the_token_id() -> None:
    assert token_hmac("what do ya want for nothing?", "Jefe").hex() == (
        "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
        "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737")
    assert base64.b64decode(token_password(b"\x01\x02")) == b"\x01\x02"


def _login(server: ScramServer, user: str, password: str, extensions: str) -> Success:
    """RFC 5802's client, with Kafka's extensions after the nonce (signed as part of the
    client-first-bare)."""
    bare = f"n={user},r=clientnonce{extensions}"
    first = server.respond(f"n,,{bare}".encode())
    assert isinstance(first, Challenge)
    server_first = first.token.decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    done = server.respond(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert isinstance(done, Success)
    return done


def _server(creds: TokenCredentials, known: bool = True) -> ScramServer:
    def token_lookup(token_id: str, m: ScramMechanism
                     ) -> tuple[ScramCredential, KafkaPrincipal] | None:
        return (creds.credential(token_id, m), OWNER) if known and token_id == "tok-1" else None
    return ScramServer(SHA256, lambda user, m: None, token_lookup=token_lookup)


def test_a_token_logs_in_as_its_owner() -> None:
    creds = TokenCredentials("secret")
    password = token_password(creds.hmac("tok-1"))
    done = _login(_server(creds), "tok-1", password, ",tokenauth=true")
    assert done.principal == OWNER and done.principal.token_authenticated
    assert creds.credential("tok-1", SHA256) is creds.credential("tok-1", SHA256)  # kept


def test_refusals() -> None:
    creds = TokenCredentials("secret")
    password = token_password(creds.hmac("tok-1"))
    with pytest.raises(AuthenticationFailed):  # another secret's HMAC
        _login(_server(creds), "tok-1", token_password(token_hmac("tok-1", "other")),
               ",tokenauth=true")
    with pytest.raises(AuthenticationFailed):  # unknown, expired or tokens off
        _login(_server(creds, known=False), "tok-1", password, ",tokenauth=true")
    with pytest.raises(AuthenticationFailed):  # without the extension: a user, who is unknown
        _login(_server(creds), "tok-1", password, "")
    with pytest.raises(AuthenticationFailed, match="unsupported"):
        _login(_server(creds), "tok-1", password, ",tokenauth=true,other=1")
