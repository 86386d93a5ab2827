"""SASL/PLAIN (RFC 4616) against a users file the broker reads.

The users file (``floodmark.sasl.plain.users.file``) holds one user a line, ``name:password``
(the first ``:`` ends the name, so a password may hold one); blank lines and lines starting with
``#`` are skipped. It is read at start. PLAIN sends the password itself, so a broker refuses to
serve it on a listener without TLS unless ``floodmark.unsafe.sasl.plain.without.tls=true``
(``listener_refusal``). Passwords are compared in constant time, through their SHA-256 digests
so that the comparison does not depend on their lengths; an unknown user costs the same
comparison as a known one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from floodmark.security.principal import KafkaPrincipal
from floodmark.security.sasl.exchange import AuthenticationFailed, Success, invalid_credentials

PLAIN = "PLAIN"
UNSAFE_SETTING = "floodmark.unsafe.sasl.plain.without.tls"
MAX_FIELD_BYTES = 1024
"""RFC 4616 bounds each field to 255 octets; floodmark accepts up to 1 KiB (a long generated
password) and refuses anything longer without reading it as a name."""

_DUMMY = hashlib.sha256(b"floodmark: no such user").digest()


def _digest(password: str) -> bytes:
    return hashlib.sha256(password.encode("utf-8")).digest()


@dataclass(frozen=True)
class PlainUsers:
    """The PLAIN users a broker accepts: name -> SHA-256 of the password (the file's
    passwords are not kept in memory as text)."""

    digests: Mapping[str, bytes]

    @classmethod
    def of(cls, passwords: Mapping[str, str]) -> PlainUsers:
        return cls({name: _digest(pw) for name, pw in passwords.items()})

    def check(self, name: str, password: str) -> bool:
        expected = self.digests.get(name)
        ok = hmac.compare_digest(_digest(password), expected if expected is not None else _DUMMY)
        return ok and expected is not None

    def __len__(self) -> int:
        return len(self.digests)


def parse_plain_users(text: str, source: str = "users file") -> PlainUsers:
    """The users of a users file's text; ValueError names the line (never its password)."""
    passwords: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, password = stripped.partition(":")
        name = name.strip()
        if not sep or not name or not password:
            raise ValueError(f"{source} line {number}: expected name:password")
        if name in passwords:
            raise ValueError(f"{source} line {number}: user {name!r} given twice")
        passwords[name] = password
    return PlainUsers.of(passwords)


def load_plain_users(path: str | Path) -> tuple[PlainUsers, str | None]:
    """Read a users file: (users, a warning to log or None). The warning says when the file is
    readable by others than its owner. OSError/ValueError when it cannot be used."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    users = parse_plain_users(text, str(p))
    mode = os.stat(p).st_mode
    warning = None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        warning = (f"{p} (PLAIN passwords) is readable by group or others "
                   f"(mode {stat.S_IMODE(mode):o}); chmod 600 it")
    return users, warning


def listener_refusal(listener: str, security_protocol: str, allow_without_tls: bool) -> str | None:
    """Why PLAIN may not be enabled on this listener (None: it may): PLAIN over a listener
    without TLS sends passwords in the clear."""
    if security_protocol == "SASL_SSL" or allow_without_tls:
        return None
    return (f"listener {listener} ({security_protocol}) enables SASL mechanism PLAIN without "
            f"TLS: passwords would cross the network in the clear; use SASL_SSL, or set "
            f"{UNSAFE_SETTING}=true to allow it")


class PlainServer:
    """One PLAIN exchange: a single token ``[authzid] NUL authcid NUL passwd``."""

    mechanism = PLAIN

    def __init__(self, users: PlainUsers) -> None:
        self._users = users
        self._done = False

    def respond(self, token: bytes) -> Success:
        if self._done:
            raise AuthenticationFailed("Authentication failed: PLAIN takes a single message",
                                       "a second PLAIN message")
        self._done = True
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(
                "Authentication failed: PLAIN message must be authzid NUL username NUL password",
                f"malformed PLAIN message ({len(parts) - 1} NUL separators, expected 2)")
        if any(len(p) > MAX_FIELD_BYTES for p in parts):
            raise AuthenticationFailed("Authentication failed: PLAIN field too long",
                                       f"PLAIN field over {MAX_FIELD_BYTES} bytes")
        try:
            authzid, name, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Authentication failed: PLAIN message is not UTF-8",
                                       "PLAIN message is not UTF-8") from None
        if not name:
            raise AuthenticationFailed("Authentication failed: username not specified",
                                       "PLAIN message without a username")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified",
                                       f"PLAIN message for user {name!r} without a password")
        if authzid and authzid != name:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username", f"user {name!r} asked for authorization id {authzid!r}")
        if not self._users.check(name, password):
            why = "wrong password" if name in self._users.digests else "unknown user"
            raise AuthenticationFailed(invalid_credentials(PLAIN), f"user {name!r}: {why}")
        return Success(KafkaPrincipal.user(name), b"")
