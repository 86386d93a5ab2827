"""Checks of what a user typed, before any process starts: a data directory that can be written,
an address that can be bound. Each failure is a one-line ``CliError``."""

from __future__ import annotations

import errno
import socket
import tempfile
from pathlib import Path

from floodmark.cli.errors import CliError


def check_data_dir(path: str | Path, flag: str = "--data-dir") -> Path:
    """Create ``path`` if missing and prove a file can be written in it."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CliError(f"{flag} {path} is a file, not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p, prefix=".floodmark-probe-"):
            pass
    except OSError as exc:
        raise CliError(f"{flag} {path} cannot be written: {exc.strerror or exc}") from None
    return p


def check_bindable(host: str, port: int, flag: str = "--listen") -> None:
    """Bind and release ``host:port`` as the server will (SO_REUSEADDR); port 0 checks that the
    host is an address of this machine."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CliError(f"{flag} {host}:{port}: unknown host ({exc.strerror})") from None
    family, _type, _proto, _name, sockaddr = infos[0]
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"{flag} {host}:{port}: port {port} is already in use (another "
                           "broker? pick another port, or port 0 for any free one)") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise CliError(f"{flag} {host}:{port}: {host} is not an address of this "
                           "machine") from None
        raise CliError(f"{flag} {host}:{port}: {exc.strerror or exc}") from None
