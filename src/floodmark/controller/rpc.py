"""Broker <-> controller framing: 4-byte big-endian length, then one JSON object.

Request ``{"id": n, "method": name, "args": {...}}``; answer ``{"id": n, "result": {...}}`` or
``{"id": n, "error": code, "message": text}`` (``code`` is a Kafka ``ErrorCode``). JSON rather
than Kafka's BrokerRegistration/BrokerHeartbeat/AlterPartition messages: no client needs these,
and the record types stay readable in logs and in ``floodmark cluster status``. The methods are
the KRaft control-plane calls: register, heartbeat, fetch_metadata (long poll of the metadata
log), alter_partition, create_topic, delete_topic, create_partitions, allocate_producer_ids,
status.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

from floodmark.address import parse_host_port
from floodmark.errors import FloodmarkError
from floodmark.security import PLAINTEXT, ClientSecurity

MAX_FRAME_BYTES = 64 * 1024 * 1024
_LEN = struct.Struct(">I")


class RpcError(FloodmarkError):
    """Transport failure (connection refused/closed, timeout, bad frame)."""


def encode(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return _LEN.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    try:
        head = await reader.readexactly(4)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    (size,) = _LEN.unpack(head)
    if size > MAX_FRAME_BYTES:
        raise RpcError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
    try:
        body = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    obj = json.loads(body)
    if not isinstance(obj, dict):
        raise RpcError("frame is not a JSON object")
    return obj


def blocking_call(address: str, method: str, args: dict[str, Any],
                  timeout_s: float = 10.0, security: ClientSecurity = PLAINTEXT) -> dict[str, Any]:
    """One request on a fresh blocking connection (CLI, admin calls), over TLS when
    ``security`` says so (the controller channel's). Raises RpcError."""
    host, port = parse_host_port(address, what="controller address")
    try:
        context = security.ssl_context()
    except ValueError as exc:
        raise RpcError(f"controller {address}: {exc}") from None
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, \
                (context.wrap_socket(raw, server_hostname=security.server_hostname(host))
                 if context is not None else raw) as sock:
            sock.sendall(encode({"id": 1, "method": method, "args": args}))
            head = _recv_exact(sock, 4)
            (size,) = _LEN.unpack(head)
            if size > MAX_FRAME_BYTES:
                raise RpcError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
            obj = json.loads(_recv_exact(sock, size))
    except OSError as exc:
        raise RpcError(f"controller {address}: {exc}") from exc
    if not isinstance(obj, dict):
        raise RpcError("frame is not a JSON object")
    return obj


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise RpcError("connection closed by the controller")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
