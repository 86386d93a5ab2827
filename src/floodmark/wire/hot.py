"""Hand-written codecs for the two hot paths: Produce requests/responses and Fetch responses.

kio builds a dataclass per nested struct and copies record bytes; here the Produce request is
walked with ``struct`` and each partition's records come back as a *view* into the frame (so the
storage layer can patch offsets in place without another copy), and responses are packed directly
into a few buffers with record bytes passed by reference to ``writelines``. Output is
byte-identical to kio's (golden tests in tests/unit/wire/test_wire_hot.py).

Versions: Produce 3..13 (flexible from 9, topic ids from 13), Fetch 4..18 (flexible from 12,
topic ids from 13, KIP-951 leader hints from 16).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from floodmark.errors import FloodmarkError
from floodmark.records import CorruptRecordError, read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HHI = struct.Struct(">hhi")
_PRODUCE_PART = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
_FETCH_PART = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable
_LEADER = struct.Struct(">ii")  # leader_id, leader_epoch
_DIVERGING = struct.Struct(">iq")  # epoch, end_offset


class HotDecodeError(FloodmarkError, ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ProducePartition:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    correlation_id: int
    client_id: str | None
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[tuple[str, list[ProducePartition]]]
    # v13+ (KIP-516): each topic's id, in the order of ``topics`` (whose names are "" until the
    # broker resolves them); None before v13.
    topic_ids: tuple[uuid.UUID, ...] | None = None


# Produce names its topics by id from this version (KIP-516), in the request and the answer.
PRODUCE_TOPIC_ID_VERSION = 13


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos, max_bytes=5)
    except CorruptRecordError as exc:
        raise HotDecodeError(f"bad varint in the frame: {exc}") from None


def _skip_tags(buf: memoryview, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise HotDecodeError("tagged fields run past the end of the frame")
    return pos


def _string(buf: memoryview, pos: int, compact: bool) -> tuple[str | None, int]:
    if compact:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise HotDecodeError("string runs past the end of the frame")
    # Like Kafka's own reader, invalid UTF-8 becomes U+FFFD: a topic by that name does not
    # exist, so the client gets UNKNOWN_TOPIC_OR_PARTITION rather than a closed connection.
    return bytes(buf[pos:end]).decode("utf-8", "replace"), end


def _length(buf: memoryview, pos: int, compact: bool) -> tuple[int, int]:
    """An array's or a bytes field's length (-1: null): unsigned varint + 1 when compact,
    else INT32."""
    if compact:
        n, pos = _uvarint(buf, pos)
        return n - 1, pos
    (n,) = _I32.unpack_from(buf, pos)
    return n, pos + 4


def parse_produce_request(frame: memoryview) -> ProduceRequest:
    """Parse a Produce v3..v13 request frame (without the size prefix). From v13 the topics
    are named by id (``topic_ids``; their names are left "")."""
    try:
        _key, version, corr = _HHI.unpack_from(frame, 0)
        flexible = version >= 9
        by_id = version >= PRODUCE_TOPIC_ID_VERSION
        ids: list[uuid.UUID] = []
        (n,) = _I16.unpack_from(frame, 8)
        pos = 10
        client_id = None
        if n >= 0:
            client_id = bytes(frame[pos : pos + n]).decode("utf-8", "replace")
            pos += n
        if flexible:
            pos = _skip_tags(frame, pos)
        txn, pos = _string(frame, pos, flexible)
        acks, timeout_ms = struct.unpack_from(">hi", frame, pos)
        pos += 6
        n_topics, pos = _length(frame, pos, flexible)
        if n_topics < 0 or n_topics > 100_000:
            raise HotDecodeError(f"bad topic count {n_topics}")
        topics = []
        for _ in range(n_topics):
            name: str | None = ""
            if by_id:
                if pos + 16 > len(frame):
                    raise HotDecodeError("topic id runs past the end of the frame")
                ids.append(uuid.UUID(bytes=bytes(frame[pos:pos + 16])))
                pos += 16
            else:
                name, pos = _string(frame, pos, flexible)
            n_parts, pos = _length(frame, pos, flexible)
            if n_parts < 0 or n_parts > 1_000_000:
                raise HotDecodeError(f"bad partition count {n_parts}")
            parts = []
            for _ in range(n_parts):
                (index,) = _I32.unpack_from(frame, pos)
                pos += 4
                size, pos = _length(frame, pos, flexible)  # nullable records bytes
                records = None
                if size >= 0:
                    if pos + size > len(frame):
                        raise HotDecodeError("records run past the end of the frame")
                    records = frame[pos : pos + size]
                    pos += size
                if flexible:
                    pos = _skip_tags(frame, pos)
                parts.append(ProducePartition(index, records))
            if flexible:
                pos = _skip_tags(frame, pos)
            topics.append((name or "", parts))
        if flexible:
            pos = _skip_tags(frame, pos)
        if pos > len(frame):
            raise HotDecodeError("request runs past the end of the frame")
    except (struct.error, ValueError) as exc:
        raise HotDecodeError(str(exc)) from exc
    return ProduceRequest(corr, client_id, txn, acks, timeout_ms, topics,
                          tuple(ids) if by_id else None)


# -- encoding --------------------------------------------------------------------------------------
def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_string(out: bytearray, s: str | None, compact: bool) -> None:
    if s is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    raw = s.encode("utf-8")
    if compact:
        _put_uvarint(out, len(raw) + 1)
    else:
        out += _I16.pack(len(raw))
    out += raw


def _put_length(out: bytearray, n: int, compact: bool) -> None:
    if compact:
        _put_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


@dataclass(slots=True)
class ProducePartitionResult:
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None = None
    pending: Any = None  # the broker's future while an acks=all produce waits for the HW
    # KIP-467 (v8+): (batch_index, batch_index_error_message) of each refused record.
    record_errors: list[tuple[int, str | None]] | None = None


# A topic of a Produce answer is named by its name (v3..12) or by its topic id (v13+).
ProduceTopicKey = str | uuid.UUID


def encode_produce_response(version: int, correlation_id: int,
                            topics: list[tuple[ProduceTopicKey, list[ProducePartitionResult]]],
                            ) -> bytes:
    """Produce v3..v13 response; topics keyed by name before v13 and by topic id from v13."""
    flexible = version >= 9
    by_id = version >= PRODUCE_TOPIC_ID_VERSION
    out = bytearray(b"\0\0\0\0")
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)  # response header v1 tagged fields
    _put_length(out, len(topics), flexible)
    for key, parts in topics:
        if by_id:
            assert isinstance(key, uuid.UUID)
            out += key.bytes
        else:
            assert isinstance(key, str)
            _put_string(out, key, flexible)
        _put_length(out, len(parts), flexible)
        for p in parts:
            out += _PRODUCE_PART.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            if version >= 8:
                errors = p.record_errors or ()
                _put_length(out, len(errors), flexible)
                for batch_index, message in errors:
                    out += _I32.pack(batch_index)
                    _put_string(out, message, flexible)
                    if flexible:
                        out.append(0)  # tagged fields of the record error
                _put_string(out, p.error_message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I32.pack(0)  # throttle_time_ms
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


@dataclass(slots=True)
class FetchPartitionResult:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | memoryview | None
    # KIP-951 (v16+): (leader id, leader epoch) sent with NOT_LEADER_OR_FOLLOWER /
    # FENCED_LEADER_EPOCH so the client can move without a Metadata round trip.
    current_leader: tuple[int, int] | None = None
    # read_committed: (producer id, first offset) of the aborted transactions overlapping the
    # returned records (KIP-98). None (null on the wire, as Kafka sends) for read_uncommitted,
    # replicas and errors.
    aborted_transactions: tuple[tuple[int, int], ...] | None = None
    # KIP-392 (v11+): the replica the consumer should fetch from instead (-1: this broker).
    preferred_read_replica: int = -1
    # KIP-320 (v12+, tag 0): (epoch, end offset) where a follower's log diverges from the
    # leader's (replica fetches only).
    diverging_epoch: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """KIP-951 (v16+): where the ``current_leader`` brokers of a Fetch answer listen."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


# A topic of a Fetch answer is named by its name (v4..12) or by its topic id (v13+).
FetchTopicKey = str | uuid.UUID


def encode_fetch_response(version: int, correlation_id: int,
                          topics: list[tuple[FetchTopicKey, list[FetchPartitionResult]]],
                          error_code: int = 0, session_id: int = 0,
                          node_endpoints: list[NodeEndpoint] | None = None,
                          ) -> list[bytes | memoryview]:
    """Fetch v4..v18 response as buffers; record bytes are referenced, never copied. Topics are
    keyed by name before v13 and by topic id from v13 (KIP-516)."""
    flexible = version >= 12
    by_id = version >= 13
    leaders = version >= 16
    parts: list[bytes | memoryview] = []
    out = bytearray(b"\0\0\0\0")
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)
    out += _I32.pack(0)  # throttle_time_ms
    if version >= 7:
        out += struct.pack(">hi", error_code, session_id)
    _put_length(out, len(topics), flexible)
    total = 0
    for key, plist in topics:
        if by_id:
            assert isinstance(key, uuid.UUID)
            out += key.bytes
        else:
            assert isinstance(key, str)
            _put_string(out, key, flexible)
        _put_length(out, len(plist), flexible)
        for p in plist:
            out += _FETCH_PART.pack(p.partition_index, p.error_code, p.high_watermark,
                                    p.last_stable_offset)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            _put_length(out, -1 if aborted is None else len(aborted), flexible)
            for producer_id, first_offset in aborted or ():
                out += _ABORTED.pack(producer_id, first_offset)
                if flexible:
                    out.append(0)  # tagged fields of the aborted transaction
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            # Kafka never sends null records, an errored partition included: librdkafka rejects
            # the whole response on "MessageSetSize -1" and re-fetches in a tight loop.
            rec = p.records if p.records is not None else b""
            if flexible:
                _put_uvarint(out, len(rec) + 1)
            else:
                out += _I32.pack(len(rec))
            if len(rec):
                parts.append(bytes(out))
                total += len(out)
                parts.append(rec)
                total += len(rec)
                out = bytearray()
            if not flexible:
                continue
            leader = (leaders and p.current_leader is not None
                      and p.current_leader != (-1, -1))
            if p.diverging_epoch is not None:
                # tagged fields in tag order: tag 0 (diverging_epoch), 13 bytes: epoch, end
                # offset, no tags; then maybe tag 1
                out.append(2 if leader else 1)
                out += b"\x00\x0d" + _DIVERGING.pack(*p.diverging_epoch) + b"\x00"
            elif leader:
                out.append(1)
            else:
                out.append(0)
            if leader:
                assert p.current_leader is not None
                # tag 1 (current_leader), 9 bytes: id, epoch, no tags
                out += b"\x01\x09" + _LEADER.pack(*p.current_leader) + b"\x00"
        if flexible:
            out.append(0)
    if flexible:
        if leaders and node_endpoints:
            body = bytearray()
            _put_length(body, len(node_endpoints), True)
            for node in node_endpoints:
                body += _I32.pack(node.node_id)
                _put_string(body, node.host, True)
                body += _I32.pack(node.port)
                _put_string(body, node.rack, True)
                body.append(0)
            out.append(1)  # one tagged field: tag 0, node_endpoints
            out.append(0)
            _put_uvarint(out, len(body))
            out += body
        else:
            out.append(0)
    parts.append(bytes(out))
    total += len(out)
    first = parts[0]
    size = _I32.pack(total - 4)
    parts[0] = size + bytes(first[4:])
    return parts


# -- Fetch responses, read by a consumer (non-flexible versions) ------------------------------------
@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch answer, named as kio names it; ``records`` is a view into the
    frame (a consumer's answer is megabytes: kio would copy it, and copy it again from a view)."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTransaction] | None
    preferred_read_replica: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class FetchedTopic:
    topic: str | None
    partitions: list[FetchedPartition]


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    throttle_time: datetime.timedelta
    error_code: int
    session_id: int
    responses: list[FetchedTopic]


_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
FETCH_READ_VERSIONS = range(4, 12)
"""The Fetch versions ``parse_fetch_response`` reads (non-flexible: no tagged fields)."""


def parse_fetch_response(frame: memoryview, version: int) -> tuple[int, FetchAnswer]:
    """(correlation id, answer) of a Fetch v4..v11 response frame (without the size prefix)."""
    if version not in FETCH_READ_VERSIONS:
        raise HotDecodeError(f"Fetch v{version} is not read here")
    try:
        (corr,) = _I32.unpack_from(frame, 0)
        (throttle,) = _I32.unpack_from(frame, 4)
        pos = 8
        error_code = session_id = 0
        if version >= 7:
            error_code, session_id = struct.unpack_from(">hi", frame, pos)
            pos += 6
        n_topics, pos = _length(frame, pos, False)
        topics: list[FetchedTopic] = []
        for _ in range(max(n_topics, 0)):
            name, pos = _string(frame, pos, False)
            n_parts, pos = _length(frame, pos, False)
            parts: list[FetchedPartition] = []
            for _ in range(max(n_parts, 0)):
                index, code, hw, lso = _FETCH_PART.unpack_from(frame, pos)
                pos += _FETCH_PART.size
                log_start = -1
                if version >= 5:
                    (log_start,) = _I64.unpack_from(frame, pos)
                    pos += 8
                n_aborted, pos = _length(frame, pos, False)
                aborted: list[AbortedTransaction] | None = None
                if n_aborted >= 0:
                    aborted = []
                    for _ in range(n_aborted):
                        aborted.append(AbortedTransaction(*_ABORTED.unpack_from(frame, pos)))
                        pos += _ABORTED.size
                preferred = -1
                if version >= 11:
                    (preferred,) = _I32.unpack_from(frame, pos)
                    pos += 4
                size, pos = _length(frame, pos, False)
                records: memoryview | None = None
                if size >= 0:
                    if pos + size > len(frame):
                        raise HotDecodeError("records run past the end of the frame")
                    records = frame[pos:pos + size]
                    pos += size
                parts.append(FetchedPartition(index, code, hw, lso, log_start, aborted,
                                              preferred, records))
            topics.append(FetchedTopic(name, parts))
    except struct.error as exc:
        raise HotDecodeError(f"truncated Fetch response: {exc}") from None
    return corr, FetchAnswer(datetime.timedelta(milliseconds=throttle), error_code, session_id, topics)


def response_size(parts: list[Any]) -> int:
    """Bytes of an encoded response, its size prefix included (read from the prefix: file
    slices are not opened)."""
    return int(_I32.unpack_from(parts[0], 0)[0]) + 4


def with_throttle_time(api_key: int, version: int, parts: list[Any], throttle_ms: int) -> None:
    """Set ``throttle_time_ms`` in a Produce (api key 0) or Fetch (1) response packed by
    ``encode_produce_response`` / ``encode_fetch_response`` (which write 0 there), in place.
    Produce has the field after its topics (then the tagged fields, v9+); Fetch right after the
    response header (one byte of tagged fields from v12)."""
    if api_key == 0:
        assert len(parts) == 1, "a Produce response is one buffer"
        out = bytearray(parts[0])
        _I32.pack_into(out, len(out) - (5 if version >= 9 else 4), throttle_ms)
    elif api_key == 1:
        out = bytearray(parts[0])
        _I32.pack_into(out, 9 if version >= 12 else 8, throttle_ms)
    else:
        raise ValueError(f"no hand-packed response for api key {api_key}")
    parts[0] = bytes(out)


# -- Fetch v15 requests, sent by a follower's replica fetcher -------------------------------------
_FETCH_REQ_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_FETCH_REQ_LIMITS = struct.Struct(">iiibii")  # max_wait, min/max bytes, isolation, session
_FETCH_REQ_PART = struct.Struct(">iiqiqi")
_REPLICA_STATE = struct.Struct(">iq")  # replica_id, replica_epoch

ReplicaFetchPartition = tuple[int, int, int, int, int, int]
"""(partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
partition_max_bytes)."""


def encode_replica_fetch_request(correlation_id: int, client_id: str, replica_id: int,
                                 replica_epoch: int, max_wait_ms: int, min_bytes: int,
                                 max_bytes: int,
                                 topics: list[tuple[uuid.UUID, list[ReplicaFetchPartition]]],
                                 session_id: int = 0, session_epoch: int = -1,
                                 forgotten: list[tuple[uuid.UUID, list[int]]] | None = None,
                                 ) -> bytes:
    """A follower's Fetch v15 request (KIP-903 ``replica_state``, topics by id; a KIP-227
    session when ``session_id``/``session_epoch`` say so, with the ``forgotten`` partitions),
    framed: the bytes kio writes for it, packed by hand (kio took ~13 ms for 100 partitions)."""
    out = bytearray(b"\0\0\0\0")
    out += _FETCH_REQ_HEAD.pack(1, 15, correlation_id)
    _put_string(out, client_id, False)  # the request header's client id is never compact
    out.append(0)  # header tagged fields
    out += _FETCH_REQ_LIMITS.pack(max_wait_ms, min_bytes, max_bytes, 0, session_id,
                                  session_epoch)
    _put_length(out, len(topics), True)
    for topic_id, partitions in topics:
        out += topic_id.bytes
        _put_length(out, len(partitions), True)
        for p in partitions:
            out += _FETCH_REQ_PART.pack(*p)
            out.append(0)
        out.append(0)
    forgotten = forgotten or []
    _put_length(out, len(forgotten), True)  # forgotten_topics_data
    for topic_id, indexes in forgotten:
        out += topic_id.bytes
        _put_length(out, len(indexes), True)
        for index in indexes:
            out += _I32.pack(index)
        out.append(0)
    _put_string(out, "", True)  # rack_id
    # tagged fields: tag 1 (replica_state), 13 bytes: replica id, epoch, no tags
    out += b"\x01\x01\x0d" + _REPLICA_STATE.pack(replica_id, replica_epoch) + b"\x00"
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
