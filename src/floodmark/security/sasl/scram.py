"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server exchange.

The exchange itself is the ``scramp`` library's (message parsing, nonce and proof checks with
constant-time comparisons); floodmark adds what Kafka adds around it: the mechanisms' KIP-554
codes, credentials kept as (salt, stored key, server key, iterations) and never as a password,
the iteration bounds AlterUserScramCredentials enforces, Kafka's error messages, and a refusal
that looks the same for an unknown user as for a wrong password (an unknown user gets a
throwaway credential and fails at the proof, where a wrong password fails).

``scramp`` is imported where a SCRAM name, password or exchange is handled, not with the module:
every broker and client loads this module, few of them use SCRAM, and the library's start-up
(package metadata, ASN.1 tables) is a measurable part of a process start.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import (
    AuthenticationFailed,
    Challenge,
    Success,
    invalid_credentials,
)

MIN_ITERATIONS = 4096
"""RFC 7677's lower bound, and Kafka's."""
MAX_ITERATIONS = 16384
"""Kafka's upper bound for AlterUserScramCredentials (each login costs the broker nothing, but
the client pays ``iterations`` HMACs per connection)."""
DEFAULT_ITERATIONS = 8192
MAX_USER_NAME_CHARS = 255


class ScramMechanism(enum.IntEnum):
    """Kafka's ScramMechanism codes (KIP-554, DescribeUserScramCredentials' ``mechanism``)."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name: ``SCRAM-SHA-256``."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def digest_bytes(self) -> int:
        return 32 if self is ScramMechanism.SCRAM_SHA_256 else 64

    @classmethod
    def parse(cls, name: str) -> ScramMechanism:
        """``SCRAM-SHA-256`` (any case) -> the mechanism; ValueError, one line, otherwise."""
        try:
            return cls[name.strip().upper().replace("-", "_")]
        except KeyError:
            raise ValueError(f"unknown SCRAM mechanism {name!r} (SCRAM-SHA-256 or "
                             f"SCRAM-SHA-512)") from None


SCRAM_MECHANISMS = frozenset(m.mechanism_name for m in ScramMechanism)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps of one user's password for one mechanism (RFC 5802 §3)."""

    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks
        return (f"ScramCredential({self.mechanism.mechanism_name}, "
                f"iterations={self.iterations})")


def check_iterations(iterations: int) -> None:
    """ValueError unless ``iterations`` is within Kafka's bounds."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations {iterations} outside [{MIN_ITERATIONS}, "
                         f"{MAX_ITERATIONS}]")


def check_user_name(name: str) -> None:
    """ValueError unless ``name`` can be a SCRAM user (not empty, SASLprep-clean)."""
    if not name or len(name) > MAX_USER_NAME_CHARS:
        raise ValueError(f"user name must have 1 to {MAX_USER_NAME_CHARS} characters")
    import scramp
    from scramp.utils import saslprep

    try:
        prepared = saslprep(name)
    except scramp.ScramException:
        raise ValueError(f"user name {name!r} has characters SASLprep forbids") from None
    if prepared != name:
        raise ValueError(f"user name {name!r} is not in SASLprep form ({prepared!r})")


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes,
                    iterations: int) -> bytes:
    """RFC 5802's ``Hi(Normalize(password), salt, i)``: what AlterUserScramCredentials carries
    (KIP-554: the client salts, the password never reaches the broker)."""
    check_iterations(iterations)
    import scramp
    from scramp.utils import saslprep

    try:
        prepared = saslprep(password)
    except scramp.ScramException:
        raise ValueError("password has characters SASLprep forbids") from None
    return hashlib.pbkdf2_hmac(mechanism.hash_name, prepared.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    """The stored and server keys of a salted password (RFC 5802 §3)."""
    check_iterations(iterations)
    if len(salted) != mechanism.digest_bytes:
        raise ValueError(f"a {mechanism.mechanism_name} salted password has "
                         f"{mechanism.digest_bytes} bytes, not {len(salted)}")
    if not salt:
        raise ValueError("the salt is empty")
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def new_salt() -> bytes:
    return os.urandom(32)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int,
                             salt: bytes | None = None) -> ScramCredential:
    """A credential for a password (bootstrap users; tests)."""
    salt = new_salt() if salt is None else salt
    return credential_from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]
"""(user name, mechanism) -> that user's credential, or None."""
TokenLookup = Callable[[str, ScramMechanism], tuple[ScramCredential, KafkaPrincipal] | None]
"""(token id, mechanism) -> the delegation token's credential and its owner; None: no such
token, an expired one, or tokens disabled (KIP-48)."""
TOKEN_AUTH = "tokenauth"
"""Kafka's SCRAM extension (``tokenauth=true``): the user name is a delegation token's id."""


class ScramServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup,
                 server_nonce: str | None = None, token_lookup: TokenLookup | None = None
                 ) -> None:
        import scramp

        self._mech = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._token = False  # the client asked tokenauth=true
        self._token_owner: KafkaPrincipal | None = None
        self._user: str | None = None
        self._known = False
        self._server = scramp.ScramMechanism(mechanism.mechanism_name).make_server(
            self._auth_info, s_nonce=server_nonce)
        self._step = 0

    @property
    def mechanism(self) -> str:
        return self._mech.mechanism_name

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self._user = user
        if self._token:
            found = self._token_lookup(user, self._mech) if self._token_lookup else None
            cred, self._token_owner = (None, None) if found is None else found
        else:
            cred = self._lookup(user, self._mech)
        self._known = cred is not None
        if cred is None:  # fail at the proof, as a wrong password does
            digest = self._mech.digest_bytes
            return os.urandom(32), os.urandom(digest), os.urandom(digest), DEFAULT_ITERATIONS
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _fail(self, why: str) -> AuthenticationFailed:
        who = f"user {self._user!r}" if self._user is not None else "a client"
        return AuthenticationFailed(invalid_credentials(self.mechanism),
                                    f"{self.mechanism} exchange of {who} failed: {why}")

    def respond(self, token: bytes) -> Challenge | Success:
        import scramp

        step, self._step = self._step, self._step + 1
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("message is not UTF-8") from None
        if step == 0:
            header, bare, extensions = _client_first(text)
            self._token = extensions.get(TOKEN_AUTH, "").lower() == "true"
            try:
                # scramp reads no extensions: it is given the message without them, then
                # the whole client-first-bare the client signed (scramp 1.5 keeps it as
                # ``client_first_bare``; the AuthMessage of both proofs is made from it).
                self._server.set_client_first(header + ",".join(bare.split(",")[:2]))
                self._server.client_first_bare = bare
                return Challenge(self._server.get_server_first().encode("utf-8"))
            except scramp.ScramException as exc:
                raise self._fail(f"client-first refused ({_first_line(exc)})") from None
        if step == 1:
            try:
                self._server.set_client_final(text)
            except scramp.ScramException as exc:
                raise self._fail(f"client-final refused ({_first_line(exc)})") from None
            if not self._known or self._user is None:  # a throwaway key cannot match; belt
                raise self._fail("unknown user")
            final = self._server.get_server_final().encode("utf-8")
            if self._token:
                assert self._token_owner is not None, "a known token has its owner"
                owner = self._token_owner
                return Success(KafkaPrincipal(owner.principal_type, owner.name,
                                              token_authenticated=True), final)
            return Success(KafkaPrincipal.user(self._user), final)
        raise self._fail("message after the exchange ended")


def _client_first(text: str) -> tuple[str, str, dict[str, str]]:
    """A client-first message as (GS2 header with its two commas, client-first-bare, its
    extensions). Kafka's one extension is ``tokenauth`` (``ScramExtensions``); any other is
    refused, as Kafka's ScramSaslServer refuses unsupported extensions."""
    first = text.find(",")
    second = text.find(",", first + 1) if first >= 0 else -1
    if second < 0:
        raise AuthenticationFailed(invalid_credentials("SCRAM"),
                                   "SCRAM client-first has no GS2 header")
    header, bare = text[:second + 1], text[second + 1:]
    extensions: dict[str, str] = {}
    for attribute in bare.split(",")[2:]:  # after n=..., r=...
        key, sep, value = attribute.partition("=")
        if not sep or key != TOKEN_AUTH:
            raise AuthenticationFailed(
                "Authentication failed: unsupported SCRAM extensions",
                f"SCRAM client-first carries an unsupported extension {key!r}")
        extensions[key] = value
    return header, bare, extensions


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# -- Kafka's ``kafka-storage format --add-scram`` syntax, for bootstrap users -----------------
_ADD_SCRAM = re.compile(r"^\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ScramUser:
    """A user to create: ``SCRAM-SHA-512=[name=admin,password=admin-secret]`` (Kafka's
    ``--add-scram`` syntax; ``iterations=N`` optional)."""

    name: str
    mechanism: ScramMechanism
    password: str
    iterations: int = DEFAULT_ITERATIONS

    def __repr__(self) -> str:
        return f"ScramUser({self.name!r}, {self.mechanism.mechanism_name})"

    def credential(self) -> ScramCredential:
        return credential_from_password(self.mechanism, self.password, self.iterations)


def parse_add_scram(text: str) -> ScramUser:
    """Kafka's ``--add-scram`` argument -> a ``ScramUser``; ValueError (one line, no password)
    otherwise. Values may be quoted (``password="a,b"``)."""
    match = _ADD_SCRAM.match(text)
    if match is None:
        raise ValueError("expected MECHANISM=[name=NAME,password=PASSWORD] with MECHANISM "
                         "SCRAM-SHA-256 or SCRAM-SHA-512")
    mechanism = ScramMechanism.parse(match.group(1))
    fields: dict[str, str] = {}
    for key, value in _pairs(match.group(2)):
        if key not in ("name", "password", "iterations"):
            raise ValueError(f"--add-scram: unknown field {key!r} (name, password, iterations)")
        fields[key] = value
    if "name" not in fields or "password" not in fields:
        raise ValueError("--add-scram needs name= and password=")
    iterations = DEFAULT_ITERATIONS
    if "iterations" in fields:
        try:
            iterations = int(fields["iterations"])
        except ValueError:
            raise ValueError(f"--add-scram: iterations {fields['iterations']!r} is not a "
                             f"number") from None
    check_iterations(iterations)
    check_user_name(fields["name"])
    return ScramUser(fields["name"], mechanism, fields["password"], iterations)


def _pairs(body: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        eq = body.find("=", pos)
        if eq < 0:
            raise ValueError("--add-scram: expected key=value pairs")
        key = body[pos:eq].strip().lower()
        pos = eq + 1
        if pos < len(body) and body[pos] == '"':
            end = body.find('"', pos + 1)
            if end < 0:
                raise ValueError(f"--add-scram: unterminated quote after {key}=")
            value = body[pos + 1:end]
            pos = end + 1
        else:
            end = body.find(",", pos)
            end = len(body) if end < 0 else end
            value = body[pos:end].strip()
            pos = end
        out.append((key, value))
        if pos < len(body):
            if body[pos] != ",":
                raise ValueError(f"--add-scram: expected ',' after {key}=")
            pos += 1
    return out


def encode_b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
