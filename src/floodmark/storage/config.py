"""Per-log configuration with Kafka's names (``log.segment.bytes`` -> ``segment_bytes``...)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import ClassVar

from floodmark.records import TimestampType

LONG_MAX = 2**63 - 1
GIB = 1024**3
DAY_MS = 24 * 3600 * 1000


class FlushPolicy(enum.Enum):
    """When the log fsyncs.

    OS: Kafka's default: never on our own, the OS writes back (durability comes from replication).
    INTERVAL: every ``flush_interval_messages`` messages and/or ``flush_interval_ms``.
    GROUP_COMMIT: every append requests a flush; requests are coalesced and the owner (broker
    event-loop turn, simulator step) calls ``Log.maybe_flush``/``flush`` once for all of them.
    """

    OS = "os"
    INTERVAL = "interval"
    GROUP_COMMIT = "group-commit"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = GIB
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    """segment.jitter.ms: each segment rolls up to this much before segment.ms (a fixed share
    per segment, so partitions created together do not all roll at once)."""
    segment_index_bytes: int = 10 * 1024 * 1024
    """segment.index.bytes: the segment rolls when its offset index (8 bytes an entry) or time
    index (12 bytes) reaches this size, as Kafka's fixed-size index files fill."""
    index_interval_bytes: int = 4096
    retention_bytes: int = -1
    retention_ms: int = 7 * DAY_MS
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int | None = None
    flush_policy: FlushPolicy = FlushPolicy.OS
    max_message_bytes: int = 1048588
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    # Log compaction (Kafka's names: cleanup.policy, min.cleanable.dirty.ratio,
    # min.compaction.lag.ms, max.compaction.lag.ms, delete.retention.ms) and Kafka's defaults.
    cleanup_policy: str = "delete"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = DAY_MS
    # What the leader does with a produced batch (Kafka's LogValidator): compression.type
    # ("producer" keeps the client's codec, else one of uncompressed/gzip/snappy/lz4/zstd) with
    # KIP-390's levels, and KIP-937's bounds on CreateTime timestamps around its clock.
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    # Not a Kafka setting: how much of a segment file one read takes when the log scans its
    # batches (recovery, the producer-state rebuild, index rebuilds). Tests and the simulator
    # make it small so that batches straddle read boundaries everywhere.
    scan_chunk_bytes: int = 64 * 1024

    @property
    def compact(self) -> bool:
        """cleanup.policy has ``compact``: the cleaner keeps the latest record per key."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """cleanup.policy has ``delete``: retention.ms / retention.bytes delete old segments."""
        return "delete" in self.cleanup_policy.split(",")

    def __post_init__(self) -> None:
        if not 61 <= self.segment_bytes <= 2**31 - 1:
            raise ValueError(f"segment_bytes must be in [61, 2^31-1], got {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.segment_jitter_ms < 0:
            raise ValueError(f"segment_jitter_ms must be >= 0, got {self.segment_jitter_ms}")
        if self.segment_index_bytes < 4:
            raise ValueError(f"segment_index_bytes must be >= 4, got {self.segment_index_bytes}")
        if self.message_timestamp_before_max_ms < 0 or self.message_timestamp_after_max_ms < 0:
            raise ValueError("message.timestamp.before.max.ms / after.max.ms must be >= 0")
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.flush_interval_messages <= 0:
            raise ValueError("flush_interval_messages must be positive")
        if self.flush_interval_ms is not None and self.flush_interval_ms < 0:
            raise ValueError("flush_interval_ms must be >= 0")
        if self.scan_chunk_bytes < 61:
            raise ValueError(f"scan_chunk_bytes must be >= 61 (a batch header), got "
                             f"{self.scan_chunk_bytes}")
        if self.max_message_bytes < 0:  # 0 (Kafka's floor too): every batch is too large
            raise ValueError("max_message_bytes must be >= 0")
        policies = [p for p in self.cleanup_policy.split(",") if p]  # empty: neither
        if not set(policies) <= {"compact", "delete"} or len(set(policies)) != len(policies):
            raise ValueError(
                f"cleanup.policy must be delete, compact, compact,delete or empty, got "
                f"{self.cleanup_policy!r}"
            )
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(
                f"min.cleanable.dirty.ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}"
            )
        if self.min_compaction_lag_ms < 0:
            raise ValueError("min.compaction.lag.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError("max.compaction.lag.ms must be >= 1")
        if self.delete_retention_ms < 0:
            raise ValueError("delete.retention.ms must be >= 0")

    # Kafka topic-level names and their broker-level ``log.`` aliases.
    KAFKA_NAMES: ClassVar[dict[str, str]] = {
        "segment.bytes": "segment_bytes",
        "log.segment.bytes": "segment_bytes",
        "segment.ms": "segment_ms",
        "log.roll.ms": "segment_ms",
        "segment.jitter.ms": "segment_jitter_ms",
        "log.roll.jitter.ms": "segment_jitter_ms",
        "segment.index.bytes": "segment_index_bytes",
        "log.index.size.max.bytes": "segment_index_bytes",
        "compression.type": "compression_type",
        "compression.gzip.level": "compression_gzip_level",
        "compression.lz4.level": "compression_lz4_level",
        "compression.zstd.level": "compression_zstd_level",
        "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
        "log.message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
        "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
        "log.message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
        "index.interval.bytes": "index_interval_bytes",
        "log.index.interval.bytes": "index_interval_bytes",
        "retention.bytes": "retention_bytes",
        "log.retention.bytes": "retention_bytes",
        "retention.ms": "retention_ms",
        "log.retention.ms": "retention_ms",
        "flush.messages": "flush_interval_messages",
        "log.flush.interval.messages": "flush_interval_messages",
        "flush.ms": "flush_interval_ms",
        "log.flush.interval.ms": "flush_interval_ms",
        "max.message.bytes": "max_message_bytes",
        "message.max.bytes": "max_message_bytes",
        "message.timestamp.type": "message_timestamp_type",
        "log.message.timestamp.type": "message_timestamp_type",
        "log.flush.policy": "flush_policy",
        "flush.policy": "flush_policy",
        "cleanup.policy": "cleanup_policy",
        "log.cleanup.policy": "cleanup_policy",
        "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
        "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
        "min.compaction.lag.ms": "min_compaction_lag_ms",
        "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
        "max.compaction.lag.ms": "max_compaction_lag_ms",
        "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
        "delete.retention.ms": "delete_retention_ms",
        "log.cleaner.delete.retention.ms": "delete_retention_ms",
    }

    @classmethod
    def from_kafka(cls, values: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka config names (unknown names are ignored; values may be strings).

        ``log.roll.hours`` / ``log.retention.hours|minutes`` are honoured as Kafka does (the ms
        forms win). A finite ``flush.messages``/``flush.ms`` selects FlushPolicy.INTERVAL unless
        a policy is given explicitly (``flush.policy`` = os | interval | group-commit).
        """
        changes: dict[str, object] = {}
        hours = {"log.roll.hours": "segment_ms", "log.roll.jitter.hours": "segment_jitter_ms",
                 "log.retention.hours": "retention_ms"}
        for name, hours_attr in hours.items():
            if name in values:
                changes[hours_attr] = int(str(values[name])) * 3600 * 1000
        if "log.retention.minutes" in values:
            changes["retention_ms"] = int(str(values["log.retention.minutes"])) * 60 * 1000
        for name, value in values.items():
            attr = cls.KAFKA_NAMES.get(name)
            if attr is None:
                continue
            if attr == "message_timestamp_type":
                changes[attr] = TimestampType.parse(str(value))
            elif attr == "flush_policy":
                changes[attr] = FlushPolicy(str(value).strip().lower())
            elif attr == "flush_interval_ms":
                number = int(str(value))
                changes[attr] = None if number >= LONG_MAX else number
            elif attr == "cleanup_policy":
                changes[attr] = parse_cleanup_policy(value)
            elif attr == "compression_type":
                changes[attr] = str(value).strip()
            elif attr == "min_cleanable_dirty_ratio":
                changes[attr] = float(str(value))
            else:
                changes[attr] = int(str(value))
        config = replace(base if base is not None else cls(), **changes)  # type: ignore[arg-type]
        if "flush_policy" not in changes and (
            config.flush_interval_messages < LONG_MAX or config.flush_interval_ms is not None
        ):
            config = replace(config, flush_policy=FlushPolicy.INTERVAL)
        return config

    def to_kafka(self) -> dict[str, str]:
        """Topic-level Kafka names -> string values (for DescribeConfigs)."""
        out: dict[str, str] = {}
        seen: set[str] = set()
        for name, attr in self.KAFKA_NAMES.items():
            if attr in seen or name.startswith("log.") or name == "message.max.bytes":
                continue
            seen.add(attr)
            value = getattr(self, attr)
            if attr == "message_timestamp_type":
                out[name] = (
                    "LogAppendTime" if value == TimestampType.LOG_APPEND_TIME else "CreateTime"
                )
            elif attr == "flush_policy":
                out[name] = value.value
            elif attr == "flush_interval_ms":
                out[name] = str(LONG_MAX if value is None else value)
            elif attr in ("cleanup_policy", "compression_type"):
                out[name] = value
            else:
                out[name] = str(value)
        return out


def parse_cleanup_policy(value: object) -> str:
    """``delete``, ``compact``, ``compact,delete`` (any order, spaces, or a list) -> the
    canonical comma-separated form, ``compact`` first (Kafka lists it that way)."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    names = [str(item).strip().lower() for item in items if str(item).strip()]
    return ",".join(sorted(names))


assert {f.name for f in fields(LogConfig)} >= set(LogConfig.KAFKA_NAMES.values())
