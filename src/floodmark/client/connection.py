"""The one Kafka-protocol client connection: requests built from dicts with kio, one framing
reader with a size cap, over a blocking socket (``KafkaConnection``: the CLI, tests, Spark's
driver) or asyncio streams (``AsyncKafkaConnection``: the replica fetcher). Either runs over TLS
when its ``security.ClientSecurity`` says so (``security.protocol=ssl``), and authenticates with
SASL (``client/sasl.py``) before its first request on a SASL_PLAINTEXT / SASL_SSL listener; a
refusal is an ``AuthenticationFailed`` (a ``RequestFailed``) that says why. The SASL and TLS
modules are loaded by a connection that uses them: a plaintext one (every CLI command's) does
not load them."""

from __future__ import annotations

import asyncio
import functools
import io
import itertools
import select
import socket
import ssl
import struct
from collections.abc import Callable, Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from floodmark.address import parse_bootstrap
from floodmark.errors import FloodmarkError
from floodmark.security import PLAINTEXT, ClientSecurity
from floodmark.wire import FETCH_READ_VERSIONS, HotDecodeError, build, parse_fetch_response

API_FETCH = 1
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
"""A response frame larger than this is a broken stream, not an answer."""


class RequestFailed(FloodmarkError):
    """The connection broke, or the broker closed it, before a response arrived."""


class AuthenticationFailed(RequestFailed):
    """The broker did not authenticate this client (SASL), or TLS failed."""


def response_size(prefix: bytes) -> int:
    """The frame length from a response's 4-byte size prefix, checked against the cap."""
    (size,) = struct.unpack(">i", prefix)
    if size < 4 or size > MAX_RESPONSE_BYTES:
        raise RequestFailed(f"response frame of {size} bytes (cap {MAX_RESPONSE_BYTES})")
    return int(size)


def decode_response(frame: bytes | memoryview, api_key: int, version: int, correlation_id: int) -> Any:
    if api_key == API_FETCH and version in FETCH_READ_VERSIONS:
        # the one fast path: record batches stay views into the frame (kio copies them)
        try:
            corr, answer = parse_fetch_response(memoryview(frame), version)
        except HotDecodeError as exc:
            raise RequestFailed(f"broken Fetch response: {exc}") from None
        if corr != correlation_id:
            raise RequestFailed(f"correlation id {corr} != {correlation_id}")
        return answer
    header_reader, body_reader = _response_reader(api_key, version)
    header, used = header_reader(frame, 0)
    if header.correlation_id != correlation_id:
        raise RequestFailed(f"correlation id {header.correlation_id} != {correlation_id}")
    body, _ = body_reader(frame, used)
    return body


@functools.cache
def _response_reader(api_key: int, version: int) -> tuple[Any, Any]:
    cls = load_response_schema(api_key, version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


def encode_request(api_key: int, version: int, correlation_id: int, body: Mapping[str, Any] | Any,
                   client_id: str = "floodmark-cli") -> bytes:
    cls = load_request_schema(api_key, version)
    obj = body if isinstance(body, cls) else build(cls, body)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    header_cls = cls.__header_schema__
    header = header_cls(request_api_key=api_key, request_api_version=version,  # type: ignore[arg-type]
                        correlation_id=correlation_id, client_id=client_id)  # type: ignore[arg-type]
    entity_writer(header_cls)(out, header)
    entity_writer(cls)(out, obj)
    data = bytearray(out.getvalue())
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


class KafkaConnection:
    def __init__(self, bootstrap: str, timeout_s: float = 30.0, client_id: str = "floodmark-cli",
                 security: ClientSecurity = PLAINTEXT, source_host: str | None = None) -> None:
        """``source_host``: the local address to connect from (what ACLs match as host)."""
        host, port = parse_bootstrap(bootstrap)[0]
        context = security.ssl_context()
        sock = socket.create_connection(
            (host, port), timeout=timeout_s,
            source_address=None if source_host is None else (source_host, 0))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context is not None:
            try:
                sock = context.wrap_socket(sock, server_hostname=security.server_hostname(host))
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self.client_id = client_id
        self._correlation_id = 0
        if security.uses_sasl:
            from floodmark.client.sasl import AuthenticationError, authenticate

            try:
                authenticate(security, self.request)
            except AuthenticationError as exc:
                sock.close()
                raise AuthenticationFailed(f"{host}:{port}: {exc}") from None
            except BaseException:
                sock.close()
                raise

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: Mapping[str, Any] | Any) -> int:
        self._correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self._correlation_id, body,
                                         self.client_id))
        return self._correlation_id

    def _read_exact(self, n: int) -> memoryview:
        """``n`` bytes received in place (no copy: a Fetch answer is megabytes, and its record
        batches stay views into this buffer)."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise RequestFailed("connection closed by the broker")
            got += k
        return view.toreadonly()

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        frame = self._read_exact(response_size(bytes(self._read_exact(4))))
        return decode_response(frame, api_key, version, correlation_id)

    def request(self, api_key: int, version: int, body: Mapping[str, Any] | Any) -> Any:
        corr = self.send(api_key, version, body)
        return self.receive(api_key, version, corr)

    def readable(self) -> bool:
        """Whether an answer has (begun to) come in, so ``receive`` would not wait long."""
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        ready, _, _ = select.select([self.sock], [], [], 0)
        return bool(ready)


class AsyncKafkaConnection:
    """The same client over asyncio streams (one request at a time); connects on first use.
    Every failure (refused, reset, timed out, a broken frame) is ``RequestFailed`` and closes
    the connection; the next request reconnects."""

    def __init__(self, host: str, port: int, client_id: str,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)

    async def request(self, api_key: int, version: int, body: Mapping[str, Any] | Any,
                      timeout_s: float, *, encode: Callable[[int], bytes] | None = None) -> Any:
        """``encode``: the framed request for a correlation id, packed by the caller (a hot
        path); ``body`` is then unused."""
        try:
            return await asyncio.wait_for(self._request(api_key, version, body, encode),
                                          timeout_s)
        except AuthenticationFailed as exc:  # the broker refused this client: said as such
            self.close()
            raise AuthenticationFailed(f"{self.host}:{self.port}: {exc}") from exc
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError,
                RequestFailed) as exc:
            self.close()
            raise RequestFailed(f"{self.host}:{self.port}: {exc!r}") from exc

    async def _request(self, api_key: int, version: int, body: Mapping[str, Any] | Any,
                       encode: Callable[[int], bytes] | None = None) -> Any:
        # Local references: ``close`` (a fetcher stopped at shutdown) may clear the attributes
        # while this request waits; the closed stream then ends the request with an error.
        reader, writer = self._reader, self._writer
        if reader is None or writer is None:
            context = self.security.ssl_context()
            try:
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=context,
                    server_hostname=self.security.server_hostname(self.host))
            except ssl.SSLError as exc:  # a refused handshake, not a network error
                from floodmark.security import TlsRefused

                raise AuthenticationFailed(f"TLS handshake failed: {TlsRefused.describe(exc)}"
                                           ) from None
            self._reader, self._writer = reader, writer
            if self.security.uses_sasl:
                await self._authenticate(reader, writer)
        return await self._exchange(reader, writer, api_key, version, body, encode)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        api_key: int, version: int, body: Mapping[str, Any] | Any,
                        encode: Callable[[int], bytes] | None = None) -> Any:
        corr = next(self._ids) & 0x7FFFFFFF
        writer.write(encode(corr) if encode is not None
                     else encode_request(api_key, version, corr, body, self.client_id))
        await writer.drain()
        frame = await reader.readexactly(response_size(await reader.readexactly(4)))
        return decode_response(frame, api_key, version, corr)

    async def _authenticate(self, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        from floodmark.client.sasl import AuthenticationError, sasl_steps

        steps = sasl_steps(self.security)
        try:
            step = next(steps)
            while True:
                answer = await self._exchange(reader, writer, *step)
                try:
                    step = steps.send(answer)
                except StopIteration:
                    return
        except AuthenticationError as exc:
            raise AuthenticationFailed(str(exc)) from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
