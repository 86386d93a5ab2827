"""security/sasl: PLAIN and SCRAM server exchanges, pure (RFC 4616, RFC 5802, RFC 7677)."""

from __future__ import annotations

import base64
import os

import pytest
import scramp

from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import AuthenticationFailed, Challenge, Success
from floodmark.security.sasl.plain import (
    PlainServer,
    PlainUsers,
    listener_refusal,
    load_plain_users,
    parse_plain_users,
)
from floodmark.security.sasl.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_password,
    credential_from_salted_password,
    parse_add_scram,
    salted_password,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


# -- PLAIN ----------------------------------------------------------------------------------------
USERS = parse_plain_users("# users\nalice:alice-secret\n\nbob:b:o:b\n")


def test_plain_accepts_the_right_password_with_or_without_authzid() -> None:
    assert PlainServer(USERS).respond(b"\0alice\0alice-secret") == Success(
        KafkaPrincipal.user("alice"), b"")
    assert PlainServer(USERS).respond(b"alice\0alice\0alice-secret").principal == \
        KafkaPrincipal.user("alice")
    done = PlainServer(USERS).respond(b"bob\0bob\0b:o:b")  # a password may hold ':'
    assert done.principal == KafkaPrincipal.user("bob")


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0bad-pw-123", "invalid credentials with SASL mechanism PLAIN"),
    (b"\0mallory\0alice-secret", "invalid credentials with SASL mechanism PLAIN"),
    (b"alice\0alice-secret", "authzid NUL username NUL password"),  # truncated: one NUL
    (b"\0\0x", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"bob\0alice\0alice-secret", "authorization id that is different"),
    (b"\0\xff\xfe\0x", "not UTF-8"),
    (b"\0" + b"a" * 2000 + b"\0x", "too long"),
    (b"", "authzid NUL username NUL password"),
])
def test_plain_refusals_say_why_and_never_leak_the_password(token: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed) as info:
        PlainServer(USERS).respond(token)
    assert message in info.value.message
    for secret in ("alice-secret", "bad-pw-123", "b:o:b"):
        assert secret not in info.value.reason and secret not in info.value.message
    assert "\n" not in info.value.reason


def test_unknown_user_and_wrong_password_answer_alike() -> None:
    answers = []
    for token in (b"\0alice\0nope", b"\0nobody\0nope"):
        with pytest.raises(AuthenticationFailed) as info:
            PlainServer(USERS).respond(token)
        answers.append(info.value.message)
    assert answers[0] == answers[1]


def test_plain_takes_one_message() -> None:
    server = PlainServer(USERS)
    server.respond(b"\0alice\0alice-secret")
    with pytest.raises(AuthenticationFailed):
        server.respond(b"\0alice\0alice-secret")


@pytest.mark.parametrize("text", ["alice\n", ":pw\n", "alice:\n", "a:1\na:2\n"])
def test_bad_users_files_name_the_line_not_the_password(text: str) -> None:
    with pytest.raises(ValueError, match=r"line \d") as info:
        parse_plain_users(text)
    assert "pw" not in str(info.value).replace("password", "")


def test_users_file_readable_by_others_is_warned(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "users")
    with open(path, "w") as fh:
        fh.write("alice:s3cret\n")
    os.chmod(path, 0o600)
    users, warning = load_plain_users(path)
    assert warning is None and users.check("alice", "s3cret") and len(users) == 1
    os.chmod(path, 0o644)
    assert "chmod 600" in (load_plain_users(path)[1] or "")


def test_plain_without_tls_is_refused_unless_allowed() -> None:
    assert listener_refusal("SASL_SSL", "SASL_SSL", False) is None
    why = listener_refusal("CLIENT", "SASL_PLAINTEXT", False)
    assert why is not None and "floodmark.unsafe.sasl.plain.without.tls=true" in why
    assert listener_refusal("CLIENT", "SASL_PLAINTEXT", True) is None
    assert PlainUsers.of({}).check("x", "y") is False


# -- SCRAM ----------------------------------------------------------------------------------------
def test_rfc7677_test_vector_for_scram_sha_256() -> None:
    """RFC 7677 §3: user "user", password "pencil", the RFC's nonces and salt."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_password(SHA256, "pencil", 4096, salt)
    server = ScramServer(SHA256, lambda name, mech: cred if name == "user" else None,
                         server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == Challenge(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                              b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.respond(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                           b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == Success(KafkaPrincipal.user("user"),
                            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.mark.parametrize("mech", [SHA256, SHA512])
def test_scram_exchange_with_scramp_client(mech: ScramMechanism) -> None:
    cred = credential_from_password(mech, "alice-secret", MIN_ITERATIONS)
    server = ScramServer(mech, lambda name, m: cred if (name, m) == ("alice", mech) else None)
    client = scramp.ScramClient([mech.mechanism_name], "alice", "alice-secret")
    first = server.respond(client.get_client_first().encode())
    assert isinstance(first, Challenge)
    client.set_server_first(first.token.decode())
    done = server.respond(client.get_client_final().encode())
    assert isinstance(done, Success) and done.principal == KafkaPrincipal.user("alice")
    client.set_server_final(done.token.decode())  # the client checks the server's signature


def _client_final_for(mech: ScramMechanism, user: str, password: str,
                      server: ScramServer) -> tuple[scramp.ScramClient, str]:
    client = scramp.ScramClient([mech.mechanism_name], user, password)
    first = server.respond(client.get_client_first().encode())
    assert isinstance(first, Challenge)
    client.set_server_first(first.token.decode())
    return client, client.get_client_final()


def test_scram_refuses_wrong_password_unknown_user_alike() -> None:
    cred = credential_from_password(SHA512, "right", MIN_ITERATIONS)
    lookup = lambda name, m: cred if name == "alice" else None  # noqa: E731
    messages = []
    for user, password in (("alice", "wrong"), ("nobody", "right")):
        server = ScramServer(SHA512, lookup)
        _, final = _client_final_for(SHA512, user, password, server)
        with pytest.raises(AuthenticationFailed) as info:
            server.respond(final.encode())
        messages.append(info.value.message)
        assert "right" not in info.value.reason and "wrong" not in info.value.reason
    assert messages[0] == messages[1] == ("Authentication failed during authentication due to "
                                          "invalid credentials with SASL mechanism SCRAM-SHA-512")


def test_scram_refuses_a_nonce_that_does_not_match() -> None:
    cred = credential_from_password(SHA256, "pw", MIN_ITERATIONS)
    server = ScramServer(SHA256, lambda name, m: cred)
    _, final = _client_final_for(SHA256, "alice", "pw", server)
    c, r, p = final.split(",")
    forged = f"{c},{r[:-1]}{'A' if r[-1] != 'A' else 'B'},{p}"
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.respond(forged.encode())


def test_scram_refuses_a_proof_that_does_not_match() -> None:
    cred = credential_from_password(SHA256, "pw", MIN_ITERATIONS)
    server = ScramServer(SHA256, lambda name, m: cred)
    _, final = _client_final_for(SHA256, "alice", "pw", server)
    head, proof = final.rsplit(",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[0] ^= 1
    with pytest.raises(AuthenticationFailed, match=r"proof|keys"):
        server.respond(f"{head},p={base64.b64encode(bytes(raw)).decode()}".encode())


@pytest.mark.parametrize("token", [
    b"", b"garbage", b"n,,", b"n,,n=alice", b"n,,r=abc", b"\xff\xfe", b"n,,n=alice,r=x,m=ext",
    b"n,,n=al=ice,r=abc", b"n,,n=alice,r=abc,foo=true",
])
def test_scram_refuses_malformed_client_first(token: bytes) -> None:
    server = ScramServer(SHA256, lambda name, m: None)
    with pytest.raises(AuthenticationFailed) as info:
        server.respond(token)
    assert "\n" not in info.value.reason


def test_scram_refuses_a_truncated_client_final_and_extra_messages() -> None:
    cred = credential_from_password(SHA256, "pw", MIN_ITERATIONS)
    server = ScramServer(SHA256, lambda name, m: cred)
    _, final = _client_final_for(SHA256, "alice", "pw", server)
    with pytest.raises(AuthenticationFailed):
        server.respond(final[: len(final) // 2].encode())
    with pytest.raises(AuthenticationFailed):
        server.respond(b"c=biws")


def test_salted_password_gives_the_same_credential_as_the_password() -> None:
    salt = os.urandom(16)
    for mech in (SHA256, SHA512):
        direct = credential_from_password(mech, "pässword", 4096, salt)
        salted = salted_password(mech, "pässword", salt, 4096)
        assert credential_from_salted_password(mech, salted, salt, 4096) == direct
        assert len(direct.stored_key) == mech.digest_bytes
    assert "stored" not in repr(direct) and "key" not in repr(direct).lower().replace(
        "scramcredential", "")


@pytest.mark.parametrize("iterations", [4095, 16385, 0, -1])
def test_iterations_outside_kafkas_bounds_are_refused(iterations: int) -> None:
    with pytest.raises(ValueError, match="iterations"):
        salted_password(SHA256, "pw", b"salt", iterations)


def test_a_salted_password_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        credential_from_salted_password(SHA256, b"short", b"salt", 4096)
    with pytest.raises(ValueError, match="salt"):
        credential_from_salted_password(SHA256, b"x" * 32, b"", 4096)


def test_mechanism_names_and_codes_are_kafkas() -> None:
    assert ScramMechanism.parse("scram-sha-512") is SHA512 and int(SHA512) == 2
    assert SHA256.mechanism_name == "SCRAM-SHA-256" and int(SHA256) == 1
    with pytest.raises(ValueError, match="SCRAM-SHA-256 or SCRAM-SHA-512"):
        ScramMechanism.parse("SCRAM-SHA-1")


def test_add_scram_syntax_is_kafkas() -> None:
    user = parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert (user.name, user.mechanism, user.password) == ("admin", SHA512, "admin-secret")
    quoted = parse_add_scram('SCRAM-SHA-256=[name="bob",password="a,b=c",iterations=4096]')
    assert (quoted.password, quoted.iterations) == ("a,b=c", 4096)
    assert "admin-secret" not in repr(user)
    cred = user.credential()
    assert isinstance(cred, ScramCredential) and cred.iterations == user.iterations


@pytest.mark.parametrize("text", [
    "SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=name=a",
    "SCRAM-SHA-256=[name=a,password=b,iterations=12]", "SCRAM-SHA-256=[name=a,pw=b]",
    'SCRAM-SHA-256=[name=a,password="unterminated]', "SCRAM-SHA-256=[name=,password=b]",
])
def test_bad_add_scram_is_one_line_without_the_password(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_add_scram(text)
    assert "\n" not in str(info.value) and "password=b" not in str(info.value)
