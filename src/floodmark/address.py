"""``HOST:PORT``: the one rule every floodmark address follows (a broker's, the controller's and
the ui's ``--listen``, ``--metrics-listen``, ``--controller``, bootstrap lists).

- ``HOST:PORT``, and ``[v6]:PORT`` for an IPv6 host (``v6:PORT`` too: the last colon splits,
  as Kafka's clients read it); a listener scheme (``PLAINTEXT://``) is dropped.
- A port alone, ``PORT`` or ``:PORT``, is that port on 127.0.0.1; ``0.0.0.0:PORT`` is every
  interface.
- ``HOST`` alone is the caller's default port, where the caller has one.
- Anything else is a :class:`BadAddress`: a ValueError of one line that names the value.
"""

from __future__ import annotations

from floodmark.errors import FloodmarkError

LOOPBACK = "127.0.0.1"
MAX_PORT = 65535

Address = tuple[str, int]


class BadAddress(FloodmarkError, ValueError):
    """An address that is not HOST:PORT (its message is one line and names the value)."""


def parse_host_port(text: str, default_port: int | None = None, *, what: str = "address",
                    min_port: int = 0) -> Address:
    """(host, port) of one address by the rule above; ``min_port`` 1 where port 0 (any free
    port, for a listener) means nothing."""
    rest = text.strip().rpartition("://")[2]
    port: str | None
    if rest.isdigit():
        host, port = "", rest
    elif rest.startswith("["):
        host, close, after = rest[1:].partition("]")
        if not close or not host or (after and not after.startswith(":")):
            raise _bad(text, what, min_port)
        port = after[1:] if after else None
    else:
        host, sep, port = rest.rpartition(":")
        if not sep:
            host, port = rest, None
    if port is None:
        if default_port is None or not host:
            raise _bad(text, what, min_port)
        return host, default_port
    if not port.isdigit() or not min_port <= int(port) <= MAX_PORT or any(c.isspace() for c in host):
        raise _bad(text, what, min_port)
    return host or LOOPBACK, int(port)


def parse_bootstrap(text: str) -> list[Address]:
    """``HOST:PORT[,HOST:PORT...]`` (Kafka's ``bootstrap.servers``): each by the rule above,
    a port required (as Kafka's clients require it), port 0 refused."""
    out: list[Address] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        try:
            out.append(parse_host_port(item, min_port=1))
        except BadAddress:
            raise BadAddress(f"bootstrap address {item!r} is not host:port") from None
    if not out:
        raise BadAddress("no bootstrap address given")
    return out


def format_host_port(host: str, port: int) -> str:
    """The text :func:`parse_host_port` reads back as (host, port): IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bad(text: str, what: str, min_port: int) -> BadAddress:
    return BadAddress(f"{what} {text.strip()!r} is not HOST:PORT (port {min_port} to {MAX_PORT})")
