"""Bounds check of a request frame before kio's native decoder sees it.

kio's Rust reader reserves memory for whatever array count or string length a request claims
before it checks that the bytes exist: a 31-byte FindCoordinator v6 frame claiming 57 GB made it
abort the whole process (``memory allocation of 57143197680 bytes failed``), and an abort cannot
be caught in Python. :func:`check_request` walks the frame against the same schema kio will use
(header and body, legacy and flexible encodings, nullable structs, tagged fields) and refuses,
with :class:`ProtocolError`, any count or length that the remaining bytes cannot hold, any
negative length that is not a permitted null, and any malformed varint. Only then does kio decode.

The walk is compiled once per (api key, version) into a chain of small closures, so a request
costs one pass over its length fields, not a second decode.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from floodmark.records import CorruptRecordError, read_uvarint
from floodmark.wire.errors import ProtocolError

# A walker takes (buffer, position, end) and returns the position after the item.
Walker = Callable[[memoryview, int, int], int]

FIXED_SIZES: dict[str, int] = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
MAX_VARINT_BYTES = 5
# Elements that can encode in zero bytes (an entity without fields) still cost memory: cap them.
MAX_EMPTY_ELEMENTS = 10_000


def _fail(message: str, position: int) -> ProtocolError:
    return ProtocolError(f"malformed request at byte {position}: {message}")


def _need(position: int, size: int, end: int, what: str) -> int:
    if size < 0 or position + size > end:
        raise _fail(f"{what} of {size} bytes, {max(0, end - position)} remain", position)
    return position + size


def _uvarint(buf: memoryview, position: int, end: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, position, MAX_VARINT_BYTES, end)
    except CorruptRecordError as exc:
        raise _fail(str(exc.args[0]), position) from None


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _int16(buf: memoryview, position: int, end: int) -> tuple[int, int]:
    _need(position, 2, end, "int16 length")
    return _I16.unpack_from(buf, position)[0], position + 2


def _int32(buf: memoryview, position: int, end: int) -> tuple[int, int]:
    _need(position, 4, end, "int32 length")
    return _I32.unpack_from(buf, position)[0], position + 4


def _fixed(size: int, kafka_type: str) -> Walker:
    def walk(buf: memoryview, position: int, end: int) -> int:
        return _need(position, size, end, kafka_type)

    return walk


def _length_prefixed(kafka_type: str, flexible: bool, nullable: bool, legacy16: bool) -> Walker:
    """Strings (int16 / compact) and bytes/records (int32 / compact)."""

    def walk(buf: memoryview, position: int, end: int) -> int:
        start = position
        if flexible and not legacy16:
            n, position = _uvarint(buf, position, end)
            length = n - 1
        elif legacy16:
            length, position = _int16(buf, position, end)
        else:
            length, position = _int32(buf, position, end)
        if length == -1:
            if not nullable:
                raise _fail(f"null {kafka_type} where none is allowed", start)
            return position
        if length < -1:
            raise _fail(f"negative {kafka_type} length {length}", start)
        return _need(position, length, end, kafka_type)

    return walk


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Walker:
    if kafka_type in FIXED_SIZES:
        return _fixed(FIXED_SIZES[kafka_type], kafka_type)
    if kafka_type == "string":
        return _length_prefixed("string", flexible, nullable, legacy16=not flexible)
    if kafka_type in ("bytes", "records"):
        return _length_prefixed(kafka_type, flexible, nullable, legacy16=False)
    raise ProtocolError(f"unknown field type {kafka_type!r} in the request schema")


def _min_size(kafka_type: str, flexible: bool) -> int:
    if kafka_type in FIXED_SIZES:
        return FIXED_SIZES[kafka_type]
    if flexible:
        return 1
    return 2 if kafka_type == "string" else 4


def _array(element: Walker, element_min_size: int, flexible: bool, nullable: bool,
           element_fixed: bool = False) -> Walker:
    def walk(buf: memoryview, position: int, end: int) -> int:
        start = position
        if flexible:
            n, position = _uvarint(buf, position, end)
            count = n - 1
        else:
            count, position = _int32(buf, position, end)
        if count == -1:
            if not nullable:
                raise _fail("null array where none is allowed", start)
            return position
        if count < -1:
            raise _fail(f"negative array count {count}", start)
        remaining = end - position
        if element_min_size > 0:
            if count * element_min_size > remaining:
                raise _fail(f"array of {count} elements, {remaining} bytes remain", start)
        elif count > MAX_EMPTY_ELEMENTS:
            raise _fail(f"array of {count} empty elements", start)
        if element_fixed:
            return position + count * element_min_size
        for _ in range(count):
            position = element(buf, position, end)
        return position

    return walk


@functools.cache
def _entity(cls: type, is_request_header: bool = False) -> tuple[Walker, int, bool]:
    """(walker, minimum encoded size, whether every encoding has exactly that size) of one kio
    entity class. Runs of fixed-size fields are checked as one span."""
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    steps: list[Walker | int] = []  # an int: a span of fixed-size fields
    tagged: dict[int, Walker] = {}
    min_size = 0
    fixed = not flexible
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        walker, size, field_fixed = _field(field, flexible, is_request_header, tag is not None)
        if tag is not None:
            tagged[int(tag)] = walker
            continue
        min_size += size
        if field_fixed:
            if steps and isinstance(steps[-1], int):
                steps[-1] += size
            else:
                steps.append(size)
        else:
            fixed = False
            steps.append(walker)
    if flexible:
        min_size += 1  # the tagged-field count
    plan = tuple(steps)

    def walk(buf: memoryview, position: int, end: int) -> int:
        for step in plan:
            if step.__class__ is int:
                if position + step > end:
                    raise _fail(f"fields of {step} bytes, {end - position} remain", position)
                position += step
            else:
                position = step(buf, position, end)  # type: ignore[operator]
        if not flexible:
            return position
        if position < end and buf[position] == 0:
            return position + 1  # no tagged fields
        count, position = _uvarint(buf, position, end)
        if count > end - position:
            raise _fail(f"{count} tagged fields, {end - position} bytes remain", position)
        for _ in range(count):
            tag, position = _uvarint(buf, position, end)
            size, position = _uvarint(buf, position, end)
            field_end = _need(position, size, end, f"tagged field {tag}")
            known = tagged.get(tag)
            if known is not None:
                known(buf, position, field_end)
            position = field_end
        return position

    return walk, min_size, fixed


def _nullable_entity(inner: Walker) -> Walker:
    def walk(buf: memoryview, position: int, end: int) -> int:
        _need(position, 1, end, "nullable struct marker")
        marker = buf[position]
        if marker == 0xFF:  # -1: null
            return position + 1
        if marker != 1:
            raise _fail(f"nullable struct marker {marker}", position)
        return inner(buf, position + 1, end)

    return walk


def _field(field: dataclasses.Field[Any], flexible: bool, is_request_header: bool,
           is_tag: bool) -> tuple[Walker, int, bool]:
    """(walker, minimum size, fixed size?) of one field."""
    optional = False if is_tag else is_optional(field)
    kafka_type = field.metadata.get("kafka_type", "")
    if is_request_header and field.name == "client_id":
        # Kafka always writes the header's client id as a legacy nullable string.
        return _length_prefixed("string", False, True, legacy16=True), 2, False
    shape = classify_field(field)
    if isinstance(shape, PrimitiveField):
        size = _min_size(kafka_type, flexible)
        return _primitive(kafka_type, flexible, optional), size, kafka_type in FIXED_SIZES
    if isinstance(shape, PrimitiveTupleField):
        element = _primitive(kafka_type, flexible, False)
        return (_array(element, _min_size(kafka_type, flexible), flexible, optional,
                       element_fixed=kafka_type in FIXED_SIZES), 1 if flexible else 4, False)
    if isinstance(shape, EntityField):
        inner, size, fixed = _entity(shape.type_)
        if optional:
            return _nullable_entity(inner), 1, False
        return inner, size, fixed
    if isinstance(shape, EntityTupleField):
        inner, size, fixed = _entity(shape.type_)
        return _array(inner, size, flexible, optional, element_fixed=fixed), \
            1 if flexible else 4, False
    raise ProtocolError(f"unsupported field {field.name} in the request schema")


@functools.cache
def _request_walker(api_key: int, version: int) -> Walker:
    cls = load_request_schema(api_key, version)
    header_schema: Any = cls.__header_schema__
    header, _, _ = _entity(header_schema, is_request_header=True)
    body, _, _ = _entity(cls)

    def walk(buf: memoryview, position: int, end: int) -> int:
        return body(buf, header(buf, position, end), end)

    return walk


def check_request(frame: bytes | memoryview, api_key: int, version: int) -> None:
    """Refuse a request frame (without its size prefix) whose counts or lengths the frame cannot
    hold. Raises ``ProtocolError``; an unknown (api key, version) raises ``KeyError``."""
    buf = memoryview(frame)
    _request_walker(api_key, version)(buf, 0, len(buf))
