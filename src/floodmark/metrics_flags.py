"""The flags that put a process's ``/metrics`` behind TLS and a password, read without loading
prometheus_client (a process that serves no metrics never imports it; ``metrics.serve_metrics``
does the serving)."""

from __future__ import annotations

import argparse
import base64
import binascii
import hmac
import ssl


def basic_auth_ok(authorization: str | None, user: str, password: str) -> bool:
    """Does an HTTP ``Authorization`` header carry ``user`` and ``password`` (Basic)? Compared
    in constant time; the one check the dashboard and ``/metrics`` both apply."""
    if not authorization or not authorization.startswith("Basic "):
        return False
    try:
        given = base64.b64decode(authorization[6:].strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    given_user, _, given_password = given.partition(b":")
    return (hmac.compare_digest(given_user, user.encode())
            & hmac.compare_digest(given_password, password.encode()))


def add_metrics_security_arguments(p: argparse.ArgumentParser) -> None:
    """``--metrics-keystore`` and ``--metrics-password-file`` for a process's ``/metrics``."""
    p.add_argument("--metrics-keystore", default=None, metavar="FILE",
                   help="serve /metrics over HTTPS with this PEM file (certificate chain and "
                        "key, as ssl.keystore.location)")
    p.add_argument("--metrics-password-file", default=None, metavar="FILE",
                   help="scrapes need HTTP Basic credentials: user 'prometheus' and this "
                        "file's first line")


def metrics_security(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(keystore, password) from the parsed flags. ValueError: one line, never the password."""
    password = None
    if args.metrics_password_file is not None:
        try:
            lines = open(args.metrics_password_file).read().splitlines()  # noqa: SIM115
        except OSError as exc:
            raise ValueError(f"--metrics-password-file {args.metrics_password_file}: "
                             f"{exc.strerror or exc}") from None
        password = lines[0].strip() if lines else ""
        if not password:
            raise ValueError(f"--metrics-password-file {args.metrics_password_file}: the first "
                             "line is empty")
    keystore = args.metrics_keystore
    if keystore is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(keystore)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--metrics-keystore {keystore}: {exc}") from None
    return keystore, password
