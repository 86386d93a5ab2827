"""Connections from this broker to its peers for coordinator-to-broker requests (transaction
markers, share-group state): one connection per peer, each with a lock so one request is on it at
a time, opened on first use and opened again when the peer's address changes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from floodmark.client import AsyncKafkaConnection
from floodmark.security import ClientSecurity

Held = tuple[AsyncKafkaConnection, asyncio.Lock]


class PeerConnections:
    def __init__(self, client_id: str,
                 address_of: Callable[[int], tuple[str, int] | None],
                 security: Callable[[], ClientSecurity]) -> None:
        self.client_id = client_id
        self._address_of = address_of
        self._security = security
        self._held: dict[int, Held] = {}

    def get(self, node_id: int) -> Held | None:
        """The connection to ``node_id`` and its lock (None: the broker's address is unknown)."""
        address = self._address_of(node_id)
        if address is None:
            return None
        held = self._held.get(node_id)
        if held is None or (held[0].host, held[0].port) != tuple(address):
            if held is not None:
                held[0].close()
            held = (AsyncKafkaConnection(address[0], address[1], self.client_id,
                                         self._security()), asyncio.Lock())
            self._held[node_id] = held
        return held

    def close(self) -> None:
        for conn, _lock in self._held.values():
            conn.close()
        self._held.clear()
