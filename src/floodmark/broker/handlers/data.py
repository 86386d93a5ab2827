"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from floodmark.broker.sendfile import LAZY_MIN_BYTES, SendfileParts
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication.produce import produce_as_leader
from floodmark.storage.file_slice import FileSlice
from floodmark.wire.codec import RequestHeader, ms
from floodmark.wire.errors import ProtocolError
from floodmark.wire.hot import (
    FetchPartitionResult,
    HotDecodeError,
    ProducePartitionResult,
    encode_fetch_response,
    encode_produce_response,
    parse_produce_request,
)

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext
    from floodmark.broker.partition_state import PartitionState
    from floodmark.broker.server import Connection

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


# -- Produce ---------------------------------------------------------------------------------------
# Answers a client is expected to meet in normal operation: not worth a warning line each.
_ROUTINE_REFUSALS = frozenset({ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                               ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                               ErrorCode.INVALID_PRODUCER_EPOCH})


_last_refusal_warning_ms: dict[tuple[str, ErrorCode], int] = {}


def _warn_refusal(ps: PartitionState, error: ErrorCode, message: str | None, now_ms: int) -> None:
    """One line per partition and error per 10 s (a full disk refuses every produce)."""
    key = (ps.name, error)
    if now_ms - _last_refusal_warning_ms.get(key, -10_000) >= 10_000:
        _last_refusal_warning_ms[key] = now_ms
        log.warning("partition %s leader_epoch=%d refused produce: %s %s", ps.name,
                    ps.leader_epoch, error.name, message or "")


def append_partition(broker: HandlerContext, topic: str, partition: int, records: bytes | memoryview | None,
                     acks: int, now_ms: int, timeout_ms: int = 30_000) -> ProducePartitionResult:
    """One partition of a Produce request, through the one leader produce path
    (``replication.produce``): every acks=all answer, a duplicate's included, waits for the HW."""
    out = ProducePartitionResult(partition, 0, -1, -1, -1)
    ps = broker.partitions.get((topic, partition))
    if ps is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    out.log_start_offset = ps.log_start_offset
    produce_id = broker.next_produce_id() if acks == -1 else -1
    result = produce_as_leader(
        ps.core, ps.log, ps.producers, records, acks=acks, produce_id=produce_id,
        now_ms=now_ms, timeout_ms=timeout_ms, settings=broker.produce_settings(ps))
    if result.answer is not None and result.answer not in _ROUTINE_REFUSALS:
        _warn_refusal(ps, result.answer, result.error_message, now_ms)
    out.error_code = result.answer if result.answer is not None else ErrorCode.NONE
    out.error_message = result.error_message
    if result.record_errors:
        out.record_errors = result.record_errors
    if result.answer in (None, ErrorCode.NONE):
        out.base_offset = result.base_offset
        if result.log_append_time_ms >= 0:
            out.log_append_time_ms = result.log_append_time_ms
    ps.apply(result.effects)
    if result.parked:
        out.pending = broker.park_produce(produce_id)  # answered when the HW passes it
    return out


def produce_raw(broker: HandlerContext, frame: memoryview,
                version: int) -> list[bytes | memoryview] | Awaitable[list[bytes | memoryview]] | None:
    """Produce straight from the frame: records are views into it (patched in place if the
    frame is writable), the response is packed by hand (wire/hot.py)."""
    try:
        req = parse_produce_request(frame)
    except HotDecodeError as exc:
        raise ProtocolError(f"bad Produce v{version} request: {exc}") from exc
    acks = req.acks
    now_ms = broker.now_ms()
    timeout_ms = max(0, min(req.timeout_ms, 300_000))
    results: list[tuple[str, list[ProducePartitionResult]]] = []
    pending: list[ProducePartitionResult] = []
    for name, parts in req.topics:
        outs = [append_partition(broker, name, p.index, p.records, acks, now_ms, timeout_ms)
                for p in parts]
        pending.extend(o for o in outs if o.pending is not None)
        results.append((name, outs))
    if acks == 0:
        return None  # acks=0: no response at all (P4)
    if pending:
        return _await_produce(version, req.correlation_id, results, pending)
    return [encode_produce_response(version, req.correlation_id, results)]


async def _await_produce(version: int, correlation_id: int,
                         results: list[tuple[str, list[ProducePartitionResult]]],
                         pending: list[ProducePartitionResult]) -> list[bytes | memoryview]:
    for out in pending:
        assert out.pending is not None
        error, _base = await out.pending
        out.error_code = error
        if error is not ErrorCode.NONE:
            out.base_offset = -1
        out.pending = None
    return [encode_produce_response(version, correlation_id, results)]


# -- Fetch -----------------------------------------------------------------------------------------
def _read_partition(ps: PartitionState | None, p: Any, replica_id: int,
                    budget: int, lazy: bool = False) -> FetchPartitionResult:
    index = int(p.partition)
    if ps is None:
        return FetchPartitionResult(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, None)
    err = ps.check_leader_epoch(int(getattr(p, "current_leader_epoch", -1)))
    if err != ErrorCode.NONE:
        return FetchPartitionResult(index, err, -1, -1, -1, None)
    hw = ps.high_watermark
    log_start = ps.log_start_offset
    offset = int(p.fetch_offset)
    leo = ps.log_end_offset
    if offset < log_start or offset > leo:
        return FetchPartitionResult(index, ErrorCode.OFFSET_OUT_OF_RANGE, hw, hw, log_start, None)
    out = FetchPartitionResult(index, 0, hw, hw, log_start, b"")  # LSO == HW, no transactions
    bound = leo if replica_id >= 0 else hw
    if offset >= bound or budget <= 0:
        return out
    try:
        info = ps.log.read(offset, min(int(p.partition_max_bytes), budget), bound,
                           lazy_min_bytes=LAZY_MIN_BYTES if lazy else None)
    except KafkaError as exc:
        return FetchPartitionResult(index, exc.code, hw, hw, log_start, None)
    # A lazy read of a large range: the file slice stands in for the bytes (sent by sendfile;
    # the wire encoder passes records through as one response part, which wire/ cannot name).
    if info.file_slice is not None:
        out.records = info.file_slice  # type: ignore[assignment]
    else:
        out.records = info.records
    return out


FetchTopics = list[tuple[str, list[FetchPartitionResult]]]


def _fetch_once(broker: HandlerContext, req: Any, replica_id: int,
                lazy: bool = False) -> tuple[FetchTopics, int, bool]:
    budget = int(getattr(req, "max_bytes", 0x7FFFFFFF))
    total = 0
    errors = False
    topics: FetchTopics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            ps = broker.partitions.get((t.topic, int(p.partition)))
            # KIP-74: the first partition with data may exceed max_bytes by one whole batch.
            out = _read_partition(ps, p, replica_id, budget - total if total else max(budget, 1),
                                  lazy)
            n = len(out.records) if out.records else 0
            total += n
            errors = errors or out.error_code != 0
            parts.append(out)
        topics.append((t.topic, parts))
    return topics, total, errors


def _encode_fetch(header: RequestHeader, topics: FetchTopics) -> list[Any]:
    parts = encode_fetch_response(header.api_version, header.correlation_id, topics)
    if any(isinstance(p.records, FileSlice) for _, plist in topics for p in plist):
        return SendfileParts(parts)
    return parts


def _close_slices(topics: FetchTopics) -> None:
    for _, plist in topics:
        for p in plist:
            if isinstance(p.records, FileSlice):
                p.records.close()


async def _fetch_delayed(broker: HandlerContext, header: RequestHeader, req: Any, replica_id: int,
                         wait_ms: int, min_bytes: int, lazy: bool) -> list[Any]:
    keys = [(t.topic, int(p.partition)) for t in req.topics for p in t.partitions]
    deadline = broker.now_ms() + wait_ms
    while True:
        remaining = deadline - broker.now_ms()
        if remaining <= 0:
            break
        await broker.purgatory.wait(keys, remaining)
        topics, total, errors = _fetch_once(broker, req, replica_id, lazy)
        if total >= min_bytes or errors:
            return _encode_fetch(header, topics)
        _close_slices(topics)
    topics, _, _ = _fetch_once(broker, req, replica_id, lazy)
    return _encode_fetch(header, topics)


def fetch(broker: HandlerContext, header: RequestHeader, req: Any, conn: Connection) -> Any:
    replica_id = int(req.replica_id)
    lazy = conn.sendfile_fd is not None
    topics, total, errors = _fetch_once(broker, req, replica_id, lazy)
    wait_ms = min(max(ms(req.max_wait), 0), 60_000)
    min_bytes = int(req.min_bytes)
    if wait_ms <= 0 or total >= min_bytes or errors or not topics:
        return _encode_fetch(header, topics)
    _close_slices(topics)
    return _fetch_delayed(broker, header, req, replica_id, wait_ms, min_bytes, lazy)


# -- ListOffsets -----------------------------------------------------------------------------------
def _list_partition(broker: HandlerContext, ps: PartitionState | None, p: Any, isolation: int,
                    replica_id: int = -1) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": int(p.partition_index), "error_code": 0,
                           "old_style_offsets": [], "timestamp": -1, "offset": -1,
                           "leader_epoch": -1}
    if ps is None:
        out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return out
    err = ps.check_leader_epoch(int(getattr(p, "current_leader_epoch", -1)))
    if err != ErrorCode.NONE:
        out["error_code"] = int(err)
        return out
    ts = int(p.timestamp)
    cache = ps.log.epoch_cache
    if ts == LATEST and replica_id != -1:
        # Replicas and debug tools (replica_id != -1) see the log end, consumers the HW (§2.7).
        out["offset"] = ps.log_end_offset
        out["leader_epoch"] = ps.leader_epoch
    elif ts == LATEST:
        out["offset"] = ps.high_watermark  # LSO == HW without transactions
        out["leader_epoch"] = ps.leader_epoch
    elif ts == EARLIEST:
        out["offset"] = ps.log_start_offset
        out["leader_epoch"] = cache.epoch_for_offset(ps.log_start_offset)
    elif ts == MAX_TIMESTAMP:
        found = ps.log.offset_for_timestamp(MAX_TIMESTAMP)
        if found is not None and found[0] < ps.high_watermark:
            out["offset"], out["timestamp"], out["leader_epoch"] = found
    elif ts >= 0:
        found = ps.log.offset_for_timestamp(ts)
        if found is not None and found[0] < ps.high_watermark:
            out["offset"], out["timestamp"], out["leader_epoch"] = found
    else:
        out["error_code"] = int(ErrorCode.INVALID_REQUEST)
    return out


def list_offsets(broker: HandlerContext, header: RequestHeader, req: Any, conn: Connection) -> Any:
    isolation = int(getattr(req, "isolation_level", 0))
    topics = []
    for t in req.topics:
        parts = [_list_partition(broker, broker.partitions.get((t.name, int(p.partition_index))),
                                 p, isolation, int(req.replica_id)) for p in t.partitions]
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


# -- OffsetForLeaderEpoch ------------------------------------------------------------------------
def offset_for_leader_epoch(broker: HandlerContext, header: RequestHeader, req: Any,
                            conn: Connection) -> Any:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {"error_code": 0, "partition": int(p.partition),
                                   "leader_epoch": -1, "end_offset": -1}
            ps = broker.partitions.get((t.topic, int(p.partition)))
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                err, answer = ps.end_offset_for_epoch(int(p.current_leader_epoch),
                                                      int(p.leader_epoch))
                out["error_code"] = int(err)
                if err == ErrorCode.NONE:
                    out["leader_epoch"] = answer.epoch
                    out["end_offset"] = answer.end_offset
            parts.append(out)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


# -- InitProducerId --------------------------------------------------------------------------------
def init_producer_id(broker: HandlerContext, header: RequestHeader, req: Any, conn: Connection) -> Any:
    if req.transactional_id is not None:
        # Transactions are not implemented (and not advertised): only idempotent producers.
        return {"throttle_time": 0, "error_code": int(ErrorCode.INVALID_REQUEST),
                "producer_id": -1, "producer_epoch": -1}
    existing = int(getattr(req, "producer_id", -1))
    existing_epoch = int(getattr(req, "producer_epoch", -1))
    if existing >= 0 and 0 <= existing_epoch < 32766:
        # KIP-360: an idempotent producer may bump its own epoch to reset sequences.
        return {"throttle_time": 0, "error_code": 0, "producer_id": existing,
                "producer_epoch": existing_epoch + 1}
    pid = broker.controller.allocate_producer_id()
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}


def delete_records(broker: HandlerContext, header: RequestHeader, req: Any, conn: Any = None
                   ) -> dict[str, Any]:
    """DeleteRecords: the leader moves its log start offset (the *low watermark*) up to the
    requested offset (-1: the HW); never past the HW. Followers follow it from the leader's
    fetch answers (``replication.driver``). Compacted-only topics refuse (POLICY_VIOLATION)."""
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            out: dict[str, Any] = {"partition_index": index, "low_watermark": -1,
                                   "error_code": 0}
            ps = broker.partitions.get((t.name, index))
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif not ps.core.is_leader:
                out["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif ps.log.config.compact and not ps.log.config.delete:
                out["error_code"] = int(ErrorCode.POLICY_VIOLATION)
            else:
                hw = ps.high_watermark
                offset = hw if int(p.offset) == -1 else int(p.offset)
                if not 0 <= offset <= hw:
                    out["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                else:
                    try:
                        if ps.log.maybe_increment_log_start_offset(offset, hw):
                            log.info("partition %s leader_epoch=%d DeleteRecords: log start "
                                     "offset now %d", ps.name, ps.leader_epoch, offset)
                    except KafkaError as exc:
                        out["error_code"] = int(exc.code)
                    out["low_watermark"] = ps.log_start_offset
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
