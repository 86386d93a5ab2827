"""Shared machinery for the multi-process cluster tests: a ``LocalCluster`` fixture, a producer
thread that records every acknowledgement, and checks that read the replicas' segment files."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from floodmark.cluster_cli import LocalCluster
from floodmark.records import decode_batch, iter_batches

SESSION_TIMEOUT_MS = 1500


def wait_until(pred: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def start_cluster(data_dir: Path, brokers: int = 3, **controller: str) -> LocalCluster:
    settings = {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "leader.imbalance.check.interval.ms": "3000", **controller}
    return LocalCluster(data_dir, brokers, {"replica.lag.time.max.ms": "2000"},
                        settings).start()


def replica_batches(cluster: LocalCluster, node_id: int, topic: str,
                    partition: int = 0) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, exact bytes) of every batch in the replica's segment files."""
    out = []
    for seg in sorted(cluster.partition_dir(node_id, topic, partition).glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data, validate=False):
            out.append((h.base_offset, h.last_offset, bytes(data[pos:pos + h.size])))
    return out


def replica_values(cluster: LocalCluster, node_id: int, topic: str,
                   partition: int = 0) -> dict[int, bytes | None]:
    values: dict[int, bytes | None] = {}
    for _base, _last, raw in replica_batches(cluster, node_id, topic, partition):
        _h, records = decode_batch(raw, validate=False)
        for r in records:
            values[r.offset] = r.value
    return values


def prefix_below(batches: list[tuple[int, int, bytes]], hw: int) -> bytes:
    return b"".join(raw for _b, last, raw in batches if last < hw)


def log_digest(cluster: LocalCluster, node_id: int, topic: str) -> str:
    h = hashlib.sha256()
    for _b, _l, raw in replica_batches(cluster, node_id, topic):
        h.update(raw)
    return h.hexdigest()


def healed(cluster: LocalCluster, topic: str) -> bool:
    """Full ISR, and every replica's segment files hold the same batches."""
    reg = cluster.partition_registration(topic)
    if reg is None or sorted(reg["isr"]) != cluster.broker_ids or reg["leader"] < 0:
        return False
    digests = {log_digest(cluster, b, topic) for b in cluster.broker_ids}
    return len(digests) == 1


class AckLog:
    """Acknowledged (offset, value) pairs and failed sends, filled by a producer's callbacks."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, bytes]] = []
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def ok(self, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked.append((offset, value))

    def error(self, what: str) -> None:
        with self.lock:
            self.failed.append(what)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)
