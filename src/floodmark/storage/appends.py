"""What an append is: the validation of a record set before anything is written, and what the
log reports about an append."""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.errors import ErrorCode, KafkaError
from floodmark.records import LOG_OVERHEAD, BatchHeader, CorruptRecordError, validate_batch_at


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    num_records: int
    num_batches: int
    max_timestamp_ms: int
    log_append_time_ms: int
    first_batch_epoch: int
    offset_of_max_timestamp: int = -1


class NonContiguousAppendError(KafkaError):
    """A follower append whose batches do not continue the log exactly at its end offset
    (Kafka's UnexpectedAppendOffsetException)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


def validate_record_set(
    buffer: bytearray | memoryview | bytes, max_bytes: int, context: object, *, leader: bool
) -> list[tuple[int, BatchHeader]]:
    """Validate every batch of a produce/fetch record set; raise before anything is written.

    CORRUPT_MESSAGE for framing/magic/CRC errors (and, from producers, a recordsCount that
    disagrees with lastOffsetDelta); MESSAGE_TOO_LARGE above ``max_bytes`` (max.message.bytes). ``context`` (the topic
    partition) starts the messages. Returns (position, header) per batch."""
    out: list[tuple[int, BatchHeader]] = []
    position = 0
    end = len(buffer)
    try:
        while position < end:
            header = validate_batch_at(buffer, position)
            size = header.batch_length + LOG_OVERHEAD
            if size > max_bytes:
                raise KafkaError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"{context}: batch at position {position} is {size} bytes, "
                    f"max.message.bytes is {max_bytes}",
                )
            if leader and (
                header.records_count <= 0
                or header.last_offset_delta != header.records_count - 1
            ):
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"{context}: batch at position {position} has recordsCount "
                    f"{header.records_count} but lastOffsetDelta {header.last_offset_delta}",
                )
            out.append((position, header))
            position += size
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{context}: {exc}") from exc
    return out
