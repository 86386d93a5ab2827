"""Prometheus metrics (``/metrics``) for brokers and controllers, with Kafka's names.

Names follow what the Prometheus JMX exporter's usual Kafka rules make of Kafka's JMX beans
(``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` ->
``kafka_server_replicamanager_underreplicatedpartitions``), so existing alerts and dashboards
carry over; values only floodmark has are prefixed ``floodmark_``.

Cost: gauges are computed when Prometheus scrapes (a custom collector reads the broker's state;
nothing on the request path). The request path pays one ``perf_counter`` pair and a few integer
additions per request (``RequestMetrics.wrap``); histograms are folded in at scrape time.

Each process serves its registry on its own port with prometheus_client's HTTP server (a daemon
thread) and prints ``floodmark <role> <id> metrics on http://HOST:PORT/metrics`` before its
``listening on`` line, so ``LocalCluster`` records the address (``cluster status --json``).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from floodmark.address import parse_host_port
from floodmark.wire.api_table import ApiKey

# Kafka's RequestMetrics TotalTimeMs, as histogram buckets in milliseconds.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)
FETCH_FOLLOWER = "FetchFollower"


def request_name(api_key: int) -> str:
    """Kafka's request label: ``LIST_OFFSETS`` -> ``ListOffsets``."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Unknown{api_key}"


_ANSWERED = (list, bytes)  # what a dispatch returns when it answers at once
_BUFFERS = (bytes, bytearray, memoryview)
_bucket = bisect.bisect_left


class _Stats:
    __slots__ = ("buckets", "bytes_in", "bytes_out", "count", "sum_ms")

    def __init__(self) -> None:
        self.count = 0
        self.sum_ms = 0.0
        self.bytes_in = 0
        self.bytes_out = 0
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)


class RequestMetrics(Collector):
    """Requests, latency and bytes per API, counted by wrapping the broker's dispatch."""

    def __init__(self) -> None:
        self.stats: dict[int, _Stats] = {}

    def observe(self, api_key: int, bytes_in: int, parts: Any, elapsed_ms: float) -> None:
        stats = self.stats.get(api_key)
        if stats is None:
            stats = self.stats[api_key] = _Stats()
        stats.count += 1
        stats.sum_ms += elapsed_ms
        stats.buckets[_bucket(LATENCY_BUCKETS_MS, elapsed_ms)] += 1
        stats.bytes_in += bytes_in
        if parts is not None:
            # sum(map(len, ...)) runs in C; a generator expression here cost more than the rest
            # of the wrapper together (callgrind, benchmarks/metrics_instructions.py).
            stats.bytes_out += len(parts) if isinstance(parts, _BUFFERS) else sum(map(len, parts))

    def wrap(self, dispatch: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``dispatch(frame, conn)`` that also records each request's API, time and bytes."""
        observe = self.observe
        clock = time.perf_counter

        async def finish(key: int, size: int, t0: float, result: Awaitable[Any]) -> Any:
            parts = await result
            observe(key, size, parts, (clock() - t0) * 1000)
            return parts

        def timed(frame: Any, conn: Any) -> Any:
            t0 = clock()
            result = dispatch(frame, conn)
            # A tuple of types, not ``list | bytes``: that builds a new union object per call.
            if result is None or isinstance(result, _ANSWERED):
                observe((frame[0] << 8) | frame[1], len(frame), result, (clock() - t0) * 1000)
                return result
            return finish((frame[0] << 8) | frame[1], len(frame), t0, result)

        return timed

    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests received, by API (Kafka RequestsPerSec)",
                                       labels=["request"])
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                        "Time from a request's arrival to its response, ms "
                                        "(Kafka TotalTimeMs)", labels=["request"])
        size_in = CounterMetricFamily("floodmark_request_bytes",
                                      "Request bytes received, by API", labels=["request"])
        size_out = CounterMetricFamily("floodmark_response_bytes",
                                       "Response bytes sent, by API", labels=["request"])
        for key, s in sorted(list(self.stats.items())):
            name = [request_name(key)]
            requests.add_metric(name, s.count)
            cumulative = 0
            buckets: list[tuple[str, float]] = []
            for bound, n in zip([*LATENCY_BUCKETS_MS, float("inf")], s.buckets, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
            latency.add_metric(name, buckets, s.sum_ms)
            size_in.add_metric(name, s.bytes_in)
            size_out.add_metric(name, s.bytes_out)
        produce = self.stats.get(int(ApiKey.PRODUCE))
        fetch = self.stats.get(int(ApiKey.FETCH))
        yield requests
        yield latency
        yield size_in
        yield size_out
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_bytesin",
                                  "Produce request bytes received (Kafka BytesInPerSec)",
                                  value=produce.bytes_in if produce else 0)
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_bytesout",
                                  "Fetch response bytes sent, consumers and followers "
                                  "(Kafka BytesOutPerSec)",
                                  value=fetch.bytes_out if fetch else 0)


def serve_metrics(collectors: Sequence[Collector], listen: str) -> tuple[str, int]:
    """Serve ``collectors`` on ``listen`` (HOST:PORT, port 0 = any; a bad one is a
    BadAddress, before anything starts); returns (host, port)."""
    host, port = parse_host_port(listen, what="--metrics-listen")
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return host, int(server.server_port)
