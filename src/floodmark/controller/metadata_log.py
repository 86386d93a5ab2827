"""The controller's metadata log: ``__cluster_metadata-0`` in floodmark's own log format.

Each decision's records go into one record batch (one JSON value per record, offsets
consecutive), appended with ``floodmark.storage.Log`` and fsynced before anyone is answered, so a
restarted controller replays exactly what it had promised. Recovery is the storage layer's
(torn tails truncated). The log's offsets are the metadata offsets brokers fetch from, and a
``register_broker`` record's offset is that broker's epoch.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from floodmark.controller.image import MetadataRecord
from floodmark.records import Record, build_batch, decode_records
from floodmark.storage import Log, LogConfig

log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
CONTROLLER_EPOCH = 0  # one controller for now; a Raft quorum would stamp its leader epoch here


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


MAX_BATCH_BYTES = 8 * 1024 * 1024
"""One decision's records are one batch: fencing a broker that holds thousands of partitions
writes more than a partition's 1 MiB max.message.bytes (KRaft's own limit is 8 MiB too)."""


@dataclass(frozen=True, slots=True)
class MetadataLogConfig:
    """Kafka's ``metadata.log.*`` settings."""

    segment_bytes: int = 64 * 1024 * 1024  # metadata.log.segment.bytes
    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    """metadata.log.max.record.bytes.between.snapshots: committed record bytes (values) after
    the newest snapshot that make the controller write the next one (0: never)."""


class MetadataLog:
    def __init__(self, data_dir: str, config: MetadataLogConfig | None = None) -> None:
        os.makedirs(data_dir, exist_ok=True)
        self.config = config or MetadataLogConfig()
        self.path = os.path.join(data_dir, METADATA_DIR)
        # Never time- or size-based retention: only a snapshot moves the log start offset.
        self._log = Log.open(self.path, LogConfig(segment_bytes=self.config.segment_bytes,
                                                  retention_ms=-1, retention_bytes=-1,
                                                  max_message_bytes=MAX_BATCH_BYTES),
                             now_ms=_now_ms())

    @property
    def log_end_offset(self) -> int:
        return int(self._log.log_end_offset)

    @property
    def log(self) -> Log:
        """The underlying log (the controller quorum replicates it)."""
        return self._log

    def read_all(self) -> Iterator[tuple[int, MetadataRecord]]:
        return self.read_range(self._log.log_start_offset, self._log.log_end_offset)

    def read_range(self, start: int, end: int) -> Iterator[tuple[int, MetadataRecord]]:
        """The records at offsets [start, end)."""
        for offset, rec, _ in self.read_range_sized(start, end):
            yield offset, rec

    def read_range_sized(self, start: int, end: int
                         ) -> Iterator[tuple[int, MetadataRecord, int]]:
        """The records at offsets [start, end), each with its value's size in bytes."""
        offset = max(start, self._log.log_start_offset)
        end = min(end, self._log.log_end_offset)
        while offset < end:
            info = self._log.read(offset, 1 << 20, end)
            if info.is_empty:
                break
            for rec in decode_records(info.records):
                if rec.value is not None and offset <= rec.offset < end:
                    yield rec.offset, json.loads(rec.value), len(rec.value)
            if info.next_offset <= offset:
                break
            offset = info.next_offset

    def append(self, records: list[tuple[int, MetadataRecord]]) -> None:
        """Append and fsync. The offsets the logic assigned must be the log's next offsets."""
        if not records:
            return
        first = records[0][0]
        if first != self._log.log_end_offset:
            raise RuntimeError(f"metadata log at {self._log.log_end_offset}, records start at "
                               f"{first}")
        now = _now_ms()
        batch = build_batch([Record(i, now, None, json.dumps(rec, sort_keys=True).encode())
                             for i, (_, rec) in enumerate(records)])
        info = self._log.append_as_leader(bytearray(batch), CONTROLLER_EPOCH, now)
        assert info.first_offset == first, (info.first_offset, first)
        self._log.flush(now)

    def close(self) -> None:
        self._log.close()
