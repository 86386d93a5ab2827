"""The broker's wire boundary, named in one place.

A request body reaches a handler decoded by kio (``wire.codec.decode_request``). kio's classes
are generated per API key and version and carry no types mypy can check (``kio.*`` is imported
with ``ignore_missing_imports``), so a decoded request, and any part of one (a topic, a partition
entry), is a ``WireRequest``. A handler answers with a ``WireResponse`` (a dict of kio's field
names that ``wire.codec.build`` turns into the response class), with encoded ``Parts`` (the hot
paths), with None (no answer: Produce with acks=0), or with an awaitable of one of those.

Past this boundary the broker's values have real types: settings are ``config.ConfigValue``,
topics ``metadata.TopicMeta``, partitions ``PartitionState``, groups ``groups`` dataclasses.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, TypeAlias

from floodmark.broker.sendfile import SendfileParts
from floodmark.security import KafkaPrincipal, SaslSession

WireRequest: TypeAlias = Any
"""A decoded kio request, or a part of one (kio's generated classes are untyped)."""
WireResponse: TypeAlias = dict[str, Any]
"""A response body (or a part of one) as kio's field names to values, for ``codec.build``."""
Parts: TypeAlias = list[bytes | memoryview]
"""An encoded response: size prefix, header and body, for ``transport.writelines``."""
Encoded: TypeAlias = Parts | SendfileParts
"""An encoded response, or one whose records are file slices to send with sendfile."""
Answer: TypeAlias = WireResponse | Encoded | None
HandlerResult: TypeAlias = Answer | Awaitable[Answer]


class ClientConnection(Protocol):
    """What a handler sees of the client's connection (``server.Connection``)."""

    peer: str
    """``host:port`` of the client."""
    sendfile_fd: int | None
    """The socket's descriptor when Fetch may send records with sendfile, else None."""
    client_host: str
    """The client's address without the port (what ACLs match as ``host``)."""
    principal: KafkaPrincipal
    """Who authenticated on this connection (``User:ANONYMOUS`` if nobody did)."""
    listener_name: str
    """The listener the client connected to (``PLAINTEXT``, ``SASL_SSL``, ... or a custom name)."""
    security_protocol: str
    """The listener's security protocol (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``)."""
    sasl: SaslSession | None
    """The connection's SASL authenticator on a SASL listener, else None."""

    def abort(self) -> None:
        """Close the connection now (what is queued is dropped)."""

    def close(self) -> None:
        """Close the connection once what is written is sent (within a bound)."""

    def mute_for(self, delay_ms: int) -> None:
        """A quota throttled this client: read nothing more from it for ``delay_ms``."""
