"""Who may change the cluster through the dashboard: the one rule every mutating route checks.

A mutating route (create or delete a topic, reset a group's offsets, a fault drill) is served
only when all of these hold, else it answers 403 with one line saying which failed:

1. the dashboard was started with ``--allow-changes`` (without it the page hides the buttons);
2. the method is POST (a GET never changes anything: links, prefetchers, crawlers);
3. the ``Host`` header names the dashboard's own address (a DNS-rebinding page reaches us under
   another name);
4. an ``Origin`` header, when the request has one, is this same address over http (https when
   the dashboard serves TLS) (a browser
   sends it on every POST; another site's page posting here carries its own origin). A request
   without ``Origin`` is not a browser's (curl, scripts) and is not a cross-site one.

Pure: the server gives the request's method and headers; tests give them directly.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from floodmark.address import format_host_port

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def own_hosts(listen_host: str, port: int) -> frozenset[str]:
    """The ``Host`` values a browser sends for the dashboard listening on (host, port):
    that host; for a loopback address, localhost's names too; for a wildcard address, the
    loopback names and this machine's names (hostname, FQDN, their addresses)."""
    names = {listen_host}
    try:
        loopback = listen_host in LOOPBACK_NAMES or ipaddress.ip_address(listen_host).is_loopback
    except ValueError:
        loopback = False
    if loopback or listen_host in WILDCARDS:
        names.update(LOOPBACK_NAMES)
    if listen_host in WILDCARDS:
        names.discard(listen_host)
        host = socket.gethostname()
        names.update({host, socket.getfqdn()})
        with contextlib.suppress(OSError):
            names.update(str(info[4][0]) for info in socket.getaddrinfo(host, None))
    return frozenset(format_host_port(n, port).lower() for n in names if n)


@dataclass(frozen=True)
class ChangeGuard:
    allow_changes: bool
    hosts: frozenset[str]  # own_hosts(...)
    scheme: str = "http"  # "https" when the dashboard serves TLS (--tls-cert)

    def refusal(self, method: str, headers: Mapping[str, str]) -> str | None:
        """None: serve the change. Else the one line the 403 answer (and the log) says."""
        if not self.allow_changes:
            return ("changes are off: start the dashboard with --allow-changes to create or "
                    "delete topics, reset offsets and run fault drills")
        if method != "POST":
            return f"{method} cannot change the cluster: use POST"
        host = headers.get("Host", "").lower()
        if host not in self.hosts:
            return f"Host {host!r} is not this dashboard's address"
        origin = headers.get("Origin")
        own = f"{self.scheme}://{host}"
        if origin is not None and origin.lower() != own:
            return f"cross-site request refused (Origin {origin!r}, this dashboard is {own})"
        return None
