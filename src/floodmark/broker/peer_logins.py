"""Which brokers refused this broker as a peer: its login on the inter-broker listener (SASL
credentials, a TLS handshake) or its authorization there (no ClusterAction).

A refusal is not a transient network error: every partition fetched from that broker would
hit it, and retrying at the fetcher's usual pace would write a line per partition per try on
both brokers. So a refusal is one warning line per peer (again only when the reason changes),
every sender to that peer waits ``backoff_s`` before dialling it again (the peer may yet learn
the user: a SCRAM credential made after the brokers started), and the first success after a
refusal is one info line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

REFUSED_BACKOFF_S = 1.0
"""How long senders to a broker that refused this one wait before dialling it again (Kafka's
``reconnect.backoff.max.ms`` default)."""


@dataclass
class _Refusal:
    reason: str
    until_s: float


class PeerLogins:
    def __init__(self, node_id: int, what: str, backoff_s: float = REFUSED_BACKOFF_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``what``: who sends (``replica fetching``, ``transaction markers``), for the log."""
        self.node_id = node_id
        self.what = what
        self.backoff_s = backoff_s
        self.clock = clock
        self._refused: dict[int, _Refusal] = {}

    def wait_s(self, peer: int) -> float:
        """How long to wait before dialling ``peer`` (0: now)."""
        refusal = self._refused.get(peer)
        return 0.0 if refusal is None else max(0.0, refusal.until_s - self.clock())

    def refused(self, peer: int, reason: str, hint: str = "") -> None:
        """``peer`` refused this broker: one line when new (or the reason changed)."""
        old = self._refused.get(peer)
        self._refused[peer] = _Refusal(reason, self.clock() + self.backoff_s)
        if old is None or old.reason != reason:
            log.warning("broker %d: %s from broker %d refused: %s%s; retrying every %.0f s",
                        self.node_id, self.what, peer, reason, f" ({hint})" if hint else "",
                        self.backoff_s)

    def accepted(self, peer: int) -> None:
        """A request to ``peer`` went through."""
        if self._refused.pop(peer, None) is not None:
            log.info("broker %d: %s from broker %d accepted again", self.node_id, self.what,
                     peer)

    def is_refused(self, peer: int) -> bool:
        return peer in self._refused
