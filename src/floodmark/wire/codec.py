"""Decode Kafka request frames and encode responses with kio, version-agnostically.

Handlers build responses as plain nested dicts with Kafka's field names (kio's snake_case) and
plain ints for every number (milliseconds for durations, epoch milliseconds for timestamps, ints
for error codes). :func:`build` turns such a dict into the kio dataclass of the requested version:
it drops fields that version lacks, fills fields the handler did not give with neutral values,
and converts ints to the phantom types kio insists on. That keeps one handler per API, not one per
version. Hot paths (Produce and Fetch responses) have hand-written encoders in ``hot.py``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer

from floodmark.wire.bounds import check_request
from floodmark.wire.errors import ProtocolError

_UTC = datetime.UTC
_EPOCH = datetime.datetime.fromtimestamp(0, tz=_UTC)
_ZERO_UUID = uuid.UUID(int=0)
_ERRORS = KioErrorCode._value2member_map_


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class GatherWriter:
    """kio writer target that keeps every chunk by reference (no copy of record bytes)."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def write(self, chunk: bytes | memoryview) -> int:
        self.parts.append(chunk)
        n = len(chunk)
        self.size += n
        return n


@functools.cache
def _request_readers(api_key: int, version: int) -> tuple[Any, Any]:
    cls = load_request_schema(api_key, version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


@functools.cache
def response_class(api_key: int, version: int) -> Any:
    return load_response_schema(api_key, version)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the first 8 bytes of a request frame body."""
    if len(frame) < 8:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    key, version, corr = struct.unpack_from(">hhi", frame, 0)
    return int(key), int(version), int(corr)


def peek_client_id(frame: bytes | memoryview) -> str:
    """The header's client_id (a nullable int16-length string after the correlation id, in every
    request header version), without decoding the body; "" when null or malformed (the body's
    decoder reports a bad frame)."""
    if len(frame) < 10:
        return ""
    (length,) = struct.unpack_from(">h", frame, 8)
    if length < 0 or 10 + length > len(frame):
        return ""
    return bytes(frame[10:10 + length]).decode("utf-8", "replace")


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Decode header and body of one request (the frame without its 4-byte size prefix)."""
    key, version, _ = peek_header(frame)
    if isinstance(frame, memoryview) and not frame.readonly:
        frame = frame.toreadonly()  # kio's native reader refuses writable buffers
    try:
        header_reader, body_reader = _request_readers(key, version)
        # kio's native reader trusts the counts it reads: bound them by the bytes first.
        check_request(frame, key, version)
        header, used = header_reader(frame, 0)
        body, _ = body_reader(frame, used)
    except ProtocolError:
        raise
    except (KeyError, ValueError, IndexError, TypeError, OverflowError) as exc:
        raise ProtocolError(f"cannot decode api_key={key} v{version}: {exc!r}") from exc
    except Exception as exc:  # kio's BufferUnderflow / UnknownEntity and native errors
        raise ProtocolError(f"cannot decode api_key={key} v{version}: {exc!r}") from exc
    # Trailing bytes are ignored, as Kafka's own parser does: librdkafka sends Metadata v12 with
    # a leftover include_cluster_authorized_operations byte that the v11+ schema no longer has.
    return (
        RequestHeader(key, version, int(header.correlation_id), header.client_id),
        body,
    )


# ---------------------------------------------------------------------------------------------
# Building kio objects from plain dicts


@functools.cache
def _field_plan(cls: type) -> tuple[tuple[str, str, Any, bool, Any], ...]:
    """(name, kafka_type, element class or None, has_default, neutral value) per field."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type", "")
        hint = hints[f.name]
        elem: Any = None
        nullable = False
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            nullable = len(args) < len(typing.get_args(hint))
            hint = args[0]
            origin = typing.get_origin(hint)
        if origin is tuple:
            elem_t = typing.get_args(hint)[0]
            elem = elem_t if dataclasses.is_dataclass(elem_t) else None
            kind = "array"
        elif dataclasses.is_dataclass(hint):
            elem = hint
            kind = "struct"
        else:
            kind = kafka_type
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        plan.append((f.name, kind, elem, has_default, _neutral(kind, nullable)))
    return tuple(plan)


def _neutral(kind: str, nullable: bool) -> Any:
    if nullable:
        return None
    if kind == "array":
        return ()
    if kind in ("string",):
        return ""
    if kind == "bool":
        return False
    if kind == "error_code":
        return _ERRORS[0]
    if kind.startswith("timedelta"):
        return datetime.timedelta(0)
    if kind.startswith("datetime"):
        return _EPOCH
    if kind == "uuid":
        return _ZERO_UUID
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    return 0


def _convert(kind: str, elem: Any, value: Any) -> Any:
    if value is None:
        return None
    if kind == "array":
        if elem is None:
            return tuple(value)
        return tuple(build(elem, v) if isinstance(v, Mapping) else v for v in value)
    if kind == "struct":
        return build(elem, value) if isinstance(value, Mapping) else value
    if kind == "error_code":
        return _ERRORS[int(value)]
    if kind.startswith("timedelta"):
        if isinstance(value, datetime.timedelta):
            return value
        return datetime.timedelta(milliseconds=int(value))
    if kind.startswith("datetime"):
        if isinstance(value, datetime.datetime):
            return value
        if int(value) < 0:
            return None
        return datetime.datetime.fromtimestamp(int(value) / 1000, tz=_UTC)
    if kind == "uuid":
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    return value


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Instantiate kio dataclass ``cls`` from a dict (see the module docstring)."""
    kwargs: dict[str, Any] = {}
    for name, kind, elem, has_default, neutral in _field_plan(cls):
        if name in data:
            kwargs[name] = _convert(kind, elem, data[name])
        elif not has_default:
            kwargs[name] = neutral
    return cls(**kwargs)


def encode_response(
    api_key: int, version: int, correlation_id: int, data: Mapping[str, Any] | Any
) -> list[bytes | memoryview]:
    """Size prefix + response header + body, as a list of buffers for ``writelines``."""
    cls = response_class(api_key, version)
    body = data if isinstance(data, cls) else build(cls, data)
    out = GatherWriter()
    out.write(b"\0\0\0\0")
    header = cls.__header_schema__(correlation_id=correlation_id)
    entity_writer(cls.__header_schema__)(out, header)  # type: ignore[arg-type]  # only .write
    entity_writer(cls)(out, body)  # type: ignore[arg-type]
    out.parts[0] = struct.pack(">i", out.size - 4)
    return out.parts


def api_versions_error_response(correlation_id: int, api_keys: list[dict[str, int]]) -> list[bytes | memoryview]:
    """The v0-layout UNSUPPORTED_VERSION answer to a too-new ApiVersions request (pitfall P1)."""
    return encode_response(
        18, 0, correlation_id, {"error_code": 35, "api_keys": api_keys}
    )


def ms(value: datetime.timedelta | int | None) -> int:
    """Milliseconds from a kio duration (timedelta) or an int."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return (value.days * 86_400_000) + (value.seconds * 1000) + (value.microseconds // 1000)
    return int(value)


def epoch_ms(value: datetime.datetime | int | None) -> int:
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return int(value)
