"""Who may see the dashboard at all: TLS for the page and its API, and a password.

``floodmark ui --tls-cert FILE --tls-key FILE`` serves HTTPS (PEM files, TLS 1.2 or newer);
``--password-file FILE`` asks every request for HTTP Basic credentials (user ``--user``, default
``floodmark``; the file's first line is the password, compared in constant time). Without them
the dashboard is what it was: plain HTTP on loopback by default. A password over plain HTTP on a
non-loopback address is refused at start (it would cross the network in the clear) unless TLS is
on. Pure apart from reading the files; the server applies ``allowed`` to every request.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from floodmark.metrics_flags import basic_auth_ok

REALM = "floodmark"


@dataclass(frozen=True)
class Access:
    user: str = "floodmark"
    password: str | None = field(default=None, repr=False)  # None: no password asked

    def allowed(self, authorization: str | None) -> bool:
        """Does an ``Authorization`` header carry this user and password?"""
        return self.password is None or basic_auth_ok(authorization, self.user, self.password)


def read_password(path: str | Path) -> str:
    """The first line of ``path``. ValueError (one line, never the password) if unusable."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"--password-file {path}: {exc.strerror or exc}") from None
    password = text.splitlines()[0].strip() if text.strip() else ""
    if not password:
        raise ValueError(f"--password-file {path}: the first line is empty")
    return password


def tls_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server context from PEM files. ValueError (one line) if they do not load."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--tls-cert {cert} / --tls-key {key}: {exc}") from None
    return context
