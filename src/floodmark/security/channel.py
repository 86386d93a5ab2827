"""The security of floodmark's own channels between nodes: the controller's RPC (brokers
registering, heartbeating, proposing ISR changes and reading the metadata log; voters voting and
fetching), built from Kafka's settings in one place.

``controller.listener.names`` names the controller listener; its protocol in
``listener.security.protocol.map`` decides: PLAINTEXT (the default: no such settings), or SSL,
where the controller serves TLS with its ``ssl.*`` key and trust stores
(``listener.name.<name>.ssl.*`` first) and every caller (broker or voter) dials with its own key
store as client certificate. With ``ssl.client.auth=required`` only peers holding a certificate
of the trusted CA can register a broker, vote, send an AlterPartition or read the metadata log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from floodmark.security.client_security import PLAINTEXT, ClientSecurity
from floodmark.security.listeners import (
    CONTROLLER_LISTENER_NAMES,
    PROTOCOL_MAP,
    SecurityProtocol,
    parse_protocol_map,
)
from floodmark.security.tls import ServerTls, ssl_settings


@dataclass(frozen=True)
class ChannelSecurity:
    """How a node's controller RPC server accepts (``server``: None for PLAINTEXT) and how its
    clients dial (``client``)."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    server: ServerTls | None = None
    client: ClientSecurity = PLAINTEXT

    @classmethod
    def from_settings(cls, get: Callable[[str], object]) -> ChannelSecurity:
        """From a node's Kafka settings. ValueError: one line."""
        names_text = get(CONTROLLER_LISTENER_NAMES)
        names = [n.strip().upper() for n in str(names_text or "").split(",") if n.strip()]
        if not names:
            return cls()
        map_text = get(PROTOCOL_MAP)
        protocols = parse_protocol_map(str(map_text) if map_text else None)
        name = names[0]
        if name not in protocols:
            raise ValueError(f"{CONTROLLER_LISTENER_NAMES}: listener name {name} is not in "
                             f"{PROTOCOL_MAP}")
        protocol = protocols[name]
        if protocol.uses_sasl:
            raise ValueError(f"{CONTROLLER_LISTENER_NAMES}={name} is {protocol.value}: the "
                             "controller channel speaks PLAINTEXT or SSL (mTLS)")
        if not protocol.uses_tls:
            return cls()
        server = ServerTls(ssl_settings(get, name), name)
        client = ClientSecurity.for_node(get, protocol, name)
        client.ssl_context()  # a store that does not load: said at start
        return cls(protocol, server, client)


PLAINTEXT_CHANNEL = ChannelSecurity()
