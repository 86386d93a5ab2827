"""The log's two time-and-size rules, as pure functions of the log's facts and its config:
which leading segments retention deletes (Kafka's ``retention.ms``, ``retention.bytes`` and the
log start offset, never past the high watermark) and when a flush is due (``log.flush.*``, or a
group commit's request). ``Log.apply_retention`` and ``Log.maybe_flush`` do the I/O."""

from __future__ import annotations

from collections.abc import Sequence

from floodmark.records import NO_TIMESTAMP
from floodmark.storage.config import FlushPolicy, LogConfig
from floodmark.storage.segment import Segment


def deletable_segments(segments: Sequence[Segment], log_start_offset: int, high_watermark: int,
                       config: LogConfig, now_ms: int) -> int:
    """How many leading segments retention deletes: whole segments entirely below the HW that
    are below the log start offset, older than retention.ms, or in excess of retention.bytes.
    Never the active (last) segment; with cleanup.policy=compact, only the log start offset
    deletes."""
    count = 0
    total = sum(s.size for s in segments)
    for i, segment in enumerate(segments[:-1]):  # never the active segment
        upper = segments[i + 1].base_offset  # exclusive upper bound of this segment
        if upper > high_watermark:
            break
        if upper > log_start_offset:
            if not config.delete:
                break  # cleanup.policy=compact: only the log start offset deletes segments
            expired = (
                config.retention_ms >= 0
                and segment.max_timestamp != NO_TIMESTAMP
                and now_ms - segment.max_timestamp > config.retention_ms
            )
            too_big = config.retention_bytes >= 0 and total - segment.size >= config.retention_bytes
            if not (expired or too_big):
                break
        count += 1
        total -= segment.size
    return count


def flush_checks_needed(config: LogConfig) -> bool:
    """Can a periodic flush check ever flush a log with this config? Not with FlushPolicy.OS
    (nothing requests a flush there, ``flush_due`` is always False): such a log needs no
    check timer at all, which is most logs of a broker with Kafka's defaults."""
    return config.flush_policy is not FlushPolicy.OS


def flush_due(config: LogConfig, *, requested: bool, unflushed_messages: int,
              last_flush_ms: int, now_ms: int) -> bool:
    """Is a flush due? A requested one always (group commit, or an explicit request); with
    FlushPolicy.INTERVAL also every ``flush_interval_messages`` messages and every
    ``flush_interval_ms`` with something unflushed."""
    if requested:
        return True
    if config.flush_policy is not FlushPolicy.INTERVAL:
        return False
    if unflushed_messages >= config.flush_interval_messages:
        return True
    interval = config.flush_interval_ms
    return interval is not None and unflushed_messages > 0 and now_ms - last_flush_ms >= interval
