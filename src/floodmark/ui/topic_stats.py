"""Throughput and size per topic, from what the brokers already expose.

Read on the poller's slow refreshes only (every ``server.SLOW_EVERY``th, with the groups and the
leaders' high watermarks), so the cost per broker is one DescribeLogDirs and, where the dashboard
knows the broker's Prometheus endpoint (a local cluster's ``metrics`` URL), one scrape of it:

* ``size_bytes``: one copy of the topic, the sum of its partitions' sizes on their leaders
  (DescribeLogDirs' ``partition_size``; a partition whose leader did not answer counts its
  largest replica); ``size_on_disk_bytes``: every replica's copy, as the disks hold them;
* ``records_in_per_s``: how fast the topic's records become readable, the advance of the
  leaders' high watermarks (the same numbers as the topics table's HW column);
* ``records_out_per_s``: how fast consumer groups move through it, the advance of their
  committed offsets (Kafka has no per-topic messages-out metric);
* ``bytes_in_per_s`` / ``bytes_out_per_s``: Kafka's BrokerTopicMetrics ``BytesInPerSec`` /
  ``BytesOutPerSec`` with the ``topic`` label, summed over the brokers (bytes appended by
  Produce at the leaders, bytes sent to consumers; replication is not counted); None where no
  broker's metrics endpoint is known.

A rate is the change between two samples at least ``MIN_GAP_S`` apart, over the time between
them; None until there are two. A counter that went back (a broker restarted, an offset reset)
counts from zero, as Prometheus' ``rate()`` does.
"""

from __future__ import annotations

import threading
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from floodmark.client import KafkaConnection, RequestFailed

PartitionKey = tuple[str, int]
TIMEOUT_S = 2.0
MIN_GAP_S = 1.0
METRIC_PREFIX = "kafka_server_brokertopicmetrics_"
BYTE_COUNTERS = {"bytesin": "bytes_in_per_s", "bytesout": "bytes_out_per_s"}
MAX_METRICS_BYTES = 8 << 20  # a scrape larger than this is not read further
STAT_KEYS = ("size_bytes", "size_on_disk_bytes", "records_in_per_s", "records_out_per_s",
             "bytes_in_per_s", "bytes_out_per_s")


def log_dir_sizes(address: str) -> dict[PartitionKey, int]:
    """Each replica this broker holds: its size on disk (DescribeLogDirs v4, every topic).
    Empty when the broker does not answer (the page then shows what the others hold)."""
    try:
        with KafkaConnection(address, timeout_s=TIMEOUT_S) as conn:
            resp = conn.request(35, 4, {"topics": None})
    except (OSError, RequestFailed):
        return {}
    if int(resp.error_code):
        return {}
    return {(str(t.name), int(p.partition_index)): int(p.partition_size)
            for d in resp.results if not int(d.error_code)
            for t in d.topics for p in t.partitions if not bool(p.is_future_key)}


def topic_byte_counters(url: str) -> dict[str, dict[str, float]] | None:
    """``{topic: {"bytesin": n, "bytesout": n}}`` from one broker's ``/metrics`` (the series with
    a ``topic`` label). None when the endpoint does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            text = resp.read(MAX_METRICS_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    wanted = tuple(f"{METRIC_PREFIX}{name}_total{{" for name in BYTE_COUNTERS)
    lines = "\n".join(line for line in text.splitlines() if line.startswith(wanted))
    out: dict[str, dict[str, float]] = {}
    try:
        for family in text_string_to_metric_families(lines + "\n"):
            for sample in family.samples:
                topic = sample.labels.get("topic")
                name = sample.name[len(METRIC_PREFIX):].removesuffix("_total")
                if topic and name in BYTE_COUNTERS:
                    out.setdefault(topic, {})[name] = float(sample.value)
    except ValueError:
        return None
    return out


@dataclass
class Sample:
    time_s: float
    high_watermarks: dict[PartitionKey, int]
    committed: dict[tuple[str, str, int], int]  # (group, topic, partition)
    counters: dict[str, dict[str, dict[str, float]]]  # metrics URL -> topic -> counter


def _advance(before: dict[Any, float] | dict[Any, int], after: dict[Any, float] | dict[Any, int],
             topic_of: Any, new_from_zero: bool = False) -> dict[str, float]:
    """Per topic, the sum of each key's advance (a key that went back counts from zero). A key
    missing before is left out, or with ``new_from_zero`` counted from zero (a broker creates
    a topic's metric series at the topic's first record)."""
    out: dict[str, float] = {}
    for key, value in after.items():
        if key in before or new_from_zero:
            old = before.get(key, 0)
            step = value - old if value >= old else value
            out[topic_of(key)] = out.get(topic_of(key), 0.0) + step
    return out


@dataclass
class TopicStats:
    """The memory rates need: the last sample and the rates computed from it (thread-safe:
    the poller and API calls may refresh at once)."""

    last: Sample | None = None
    rates: dict[str, dict[str, float | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, sample: Sample) -> dict[str, dict[str, float | None]]:
        """Rates per topic (``records_in_per_s``, ``records_out_per_s``, ``bytes_in_per_s``,
        ``bytes_out_per_s``) from the previous sample to this one."""
        with self._lock:
            prev = self.last
            if prev is not None and sample.time_s - prev.time_s < MIN_GAP_S:
                return self.rates
            self.last = sample
            if prev is None:
                return self.rates
            dt = sample.time_s - prev.time_s
            records_in = _advance(prev.high_watermarks, sample.high_watermarks, lambda k: k[0])
            records_out = _advance(prev.committed, sample.committed, lambda k: k[1])
            scraped = [u for u in sample.counters if u in prev.counters]
            by_bytes: dict[str, dict[str, float]] = {}
            for name in BYTE_COUNTERS:
                for url in scraped:
                    before = {t: c[name] for t, c in prev.counters[url].items() if name in c}
                    after = {t: c[name] for t, c in sample.counters[url].items() if name in c}
                    for topic, step in _advance(before, after, lambda k: k,
                                                new_from_zero=True).items():
                        by_bytes.setdefault(topic, {}).setdefault(name, 0.0)
                        by_bytes[topic][name] += step
            topics = {t for t, _p in sample.high_watermarks} | set(by_bytes) | {
                k[1] for k in sample.committed}
            rates: dict[str, dict[str, float | None]] = {}
            for t in topics:
                row: dict[str, float | None] = {
                    "records_in_per_s": round(records_in.get(t, 0.0) / dt, 1),
                    "records_out_per_s": round(records_out.get(t, 0.0) / dt, 1)}
                for name, key in BYTE_COUNTERS.items():
                    row[key] = (round(by_bytes.get(t, {}).get(name, 0.0) / dt) if scraped
                                else None)
                rates[t] = row
            self.rates = rates
            return rates


def topic_sizes(sizes: dict[int, dict[PartitionKey, int]], leaders: dict[PartitionKey, int]
                ) -> dict[str, dict[str, int]]:
    """Per topic ``size_bytes`` (one copy: the leaders') and ``size_on_disk_bytes`` (every
    replica), from each broker's DescribeLogDirs answer."""
    out: dict[str, dict[str, int]] = {}
    keys = {k for answer in sizes.values() for k in answer}
    for key in keys:
        copies = {b: answer[key] for b, answer in sizes.items() if key in answer}
        one = copies.get(leaders.get(key, -1), max(copies.values()))
        row = out.setdefault(key[0], {"size_bytes": 0, "size_on_disk_bytes": 0})
        row["size_bytes"] += one
        row["size_on_disk_bytes"] += sum(copies.values())
    return out


def committed_of(groups: list[dict[str, Any]]) -> dict[tuple[str, str, int], int]:
    """The groups' committed offsets (``GET /api/groups``'s rows) as a sample needs them."""
    return {(str(g["group"]), str(o["topic"]), int(o["partition"])): int(o["committed_offset"])
            for g in groups for o in g.get("offsets", []) if int(o["committed_offset"]) >= 0}
