"""Which broker incarnations still hold a connection to this controller (issue 11 item 5).

A broker keeps two long-lived connections to the controller (control calls and the metadata
long poll). When its process dies the kernel closes both at once; a broker that is merely slow
or stopped (SIGSTOP), or cut off by the network, keeps them open (no FIN is sent), so for it the
session timeout stays the rule. ``BrokerConnections`` counts, per (broker id, broker epoch), the
open connections that have spoken for that incarnation; ``closed`` reports when the last one
went. The controller then fences that incarnation at once instead of after the session timeout.

A controller that just became active saw no connection close: those of a broker that died with
the previous active controller (combined mode, or one host) went to that controller.
``ActivationSweep`` says, once, some grace after activation, which registered, unfenced
incarnations still hold no connection to this controller; the server asks each one's port the
same question as when its connections close (a refusal fences; anything else leaves it to the
session timeout, so a live broker that has not reconnected yet is never fenced for it).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from floodmark.controller.image import BrokerRegistration

Incarnation = tuple[int, int]  # (broker id, broker epoch)
ACTIVATION_GRACE_MS = 100  # after activation: how long live brokers get to reconnect unprobed


def speaker(method: str, args: dict[str, Any], answer: dict[str, Any]) -> Incarnation | None:
    """The broker incarnation a request spoke for, if any."""
    try:
        if method == "register":
            result = answer.get("result")
            if isinstance(result, dict) and "broker_epoch" in result:
                return int(args["broker_id"]), int(result["broker_epoch"])
            return None
        if method in ("heartbeat", "fetch_metadata", "alter_partition") and "broker_id" in args:
            epoch = int(args.get("broker_epoch", -1))
            return (int(args["broker_id"]), epoch) if epoch >= 0 else None
    except (KeyError, TypeError, ValueError):
        return None
    return None


class BrokerConnections:
    def __init__(self) -> None:
        self._by_connection: dict[Hashable, Incarnation] = {}
        self._open: dict[Incarnation, set[Hashable]] = {}

    def spoke(self, connection: Hashable, who: Incarnation) -> None:
        old = self._by_connection.get(connection)
        if old == who:
            return
        if old is not None:
            self._drop(connection, old)
        self._by_connection[connection] = who
        self._open.setdefault(who, set()).add(connection)

    def closed(self, connection: Hashable) -> Incarnation | None:
        """The connection ended; returns the incarnation if it was its last one."""
        who = self._by_connection.pop(connection, None)
        if who is None:
            return None
        return who if self._drop(connection, who) else None

    def has_connection(self, who: Incarnation) -> bool:
        return bool(self._open.get(who))

    def _drop(self, connection: Hashable, who: Incarnation) -> bool:
        conns = self._open.get(who)
        if conns is None:
            return False
        conns.discard(connection)
        if conns:
            return False
        del self._open[who]
        return True


def unconnected(brokers: Mapping[int, BrokerRegistration],
                connections: BrokerConnections) -> list[Incarnation]:
    """Registered incarnations that are unfenced, not shutting down, and hold no connection."""
    return [(broker_id, reg.broker_epoch) for broker_id, reg in sorted(brokers.items())
            if reg.acceptable and not connections.has_connection((broker_id, reg.broker_epoch))]


class ActivationSweep:
    """Once per activation, ``grace_ms`` after it: the incarnations with no connection."""

    def __init__(self, grace_ms: int = ACTIVATION_GRACE_MS) -> None:
        self.grace_ms = grace_ms
        self._due_ms: int | None = None

    def activated(self, now_ms: int) -> None:
        self._due_ms = now_ms + self.grace_ms

    def deactivated(self) -> None:
        self._due_ms = None

    def due(self, now_ms: int, brokers: Mapping[int, BrokerRegistration],
            connections: BrokerConnections) -> list[Incarnation]:
        if self._due_ms is None or now_ms < self._due_ms:
            return []
        self._due_ms = None
        return unconnected(brokers, connections)
