"""Prometheus metrics (``/metrics``) for brokers and controllers, with Kafka's names.

Names follow what the Prometheus JMX exporter's usual Kafka rules make of Kafka's JMX beans
(``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` ->
``kafka_server_replicamanager_underreplicatedpartitions``), so existing alerts and dashboards
carry over; values only floodmark has are prefixed ``floodmark_``.

Cost: gauges are computed when Prometheus scrapes (a custom collector reads the broker's state;
nothing on the request path). The request path pays one ``perf_counter`` pair and a few integer
additions per request (``RequestMetrics.wrap``), a third ``perf_counter`` and two more buckets
for a request answered by a coroutine (local vs remote time), a walk of the answer's
``error_code`` fields for APIs answered with an object (not Produce and Fetch, which count
their partitions' errors and per-topic bytes as they build the answer: ``BrokerTopicMetrics``);
histograms are folded in at scrape time.

Each process serves its registry on its own port with prometheus_client's HTTP server (a daemon
thread) and prints ``floodmark <role> <id> metrics on http://HOST:PORT/metrics`` before its
``listening on`` line, so ``LocalCluster`` records the address (``cluster status --json``).
``--metrics-keystore`` serves it over HTTPS (then the line says ``https://``) and
``--metrics-password-file`` asks scrapes for HTTP Basic credentials.
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
from floodmark.errors import ErrorCode
from floodmark.metrics_flags import basic_auth_ok
from floodmark.wire import ApiKey

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
    """One API's counts, apart for requests answered at once (``buckets``: their total time
    is their local time, their remote time 0) and requests answered by a coroutine (acks=all
    produce, long-poll fetch, a coordinator's wait: ``awaited_*``, total, local and remote
    each), so the at-once path pays nothing for Kafka's time breakdown; the histograms are
    added up at scrape time."""

    __slots__ = ("awaited", "awaited_local", "awaited_local_ms", "awaited_ms", "awaited_remote",
                 "awaited_total", "buckets", "bytes_in", "bytes_out", "count", "sum_ms")

    def __init__(self) -> None:
        n = len(LATENCY_BUCKETS_MS) + 1
        self.count = 0  # at once
        self.sum_ms = 0.0
        self.buckets = [0] * n
        self.awaited = 0  # by a coroutine
        self.awaited_ms = 0.0
        self.awaited_local_ms = 0.0
        self.awaited_total = [0] * n
        self.awaited_local = [0] * n
        self.awaited_remote = [0] * n
        self.bytes_in = 0
        self.bytes_out = 0

    def histograms(self) -> tuple[tuple[list[int], float], tuple[list[int], float],
                                  tuple[list[int], float]]:
        """Kafka's TotalTimeMs, LocalTimeMs and RemoteTimeMs: (buckets, sum in ms) each."""
        at_once = self.buckets
        total = [a + b for a, b in zip(at_once, self.awaited_total, strict=True)]
        local = [a + b for a, b in zip(at_once, self.awaited_local, strict=True)]
        remote = list(self.awaited_remote)
        remote[0] += self.count
        return ((total, self.sum_ms + self.awaited_ms),
                (local, self.sum_ms + self.awaited_local_ms),
                (remote, self.awaited_ms - self.awaited_local_ms))


def _histogram(stats: list[int]) -> list[tuple[str, float]]:
    cumulative = 0
    buckets: list[tuple[str, float]] = []
    for bound, n in zip([*LATENCY_BUCKETS_MS, float("inf")], stats, strict=True):
        cumulative += n
        buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
    return buckets


def error_name(code: int) -> str:
    """Kafka's error label: ``NOT_LEADER_OR_FOLLOWER``; an unknown code as its number."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_CONTAINERS = (list, tuple, dict)


def count_error_codes(answer: object, counts: dict[int, int]) -> None:
    """Add every ``error_code`` of a response (a kio message or the handlers' dicts), at any
    depth, to ``counts`` (code -> occurrences): what Kafka's ``errorCounts()`` counts per
    response, ``NONE`` included. Only where a handler answered with an object (not the
    produce and fetch hot paths, which count their own)."""
    if isinstance(answer, dict):
        code = answer.get("error_code")
        values: Iterable[object] = answer.values()
    elif isinstance(answer, _CONTAINERS):
        code, values = None, answer
    else:
        fields = getattr(answer, "__dataclass_fields__", None)
        if fields is None:
            return
        code = getattr(answer, "error_code", None)
        values = (getattr(answer, name) for name in fields)
    if isinstance(code, int):
        counts[code] = counts.get(code, 0) + 1
    for value in values:
        if isinstance(value, _CONTAINERS) or hasattr(value, "__dataclass_fields__"):
            count_error_codes(value, counts)


class RequestMetrics(Collector):
    """Requests, latency, bytes and errors per API, counted by wrapping the broker's dispatch
    (errors: ``count_errors`` / ``count_error``, called where the answer is built)."""

    def __init__(self) -> None:
        self.stats: dict[int, _Stats] = {}
        self.errors: dict[int, dict[int, int]] = {}  # api key -> error code -> answers

    def observe(self, api_key: int, bytes_in: int, parts: Any, elapsed_ms: float) -> None:
        """A request answered at once, in ``elapsed_ms``."""
        stats = self.stats.get(api_key)
        if stats is None:
            stats = self.stats[api_key] = _Stats()
        stats.bytes_in += bytes_in
        if parts is not None:
            # sum(map(len, ...)) runs in C; a generator expression here cost more than the rest
            # of the wrapper together (callgrind, benchmarks/metrics_instructions.py).
            stats.bytes_out += len(parts) if isinstance(parts, _BUFFERS) else sum(map(len, parts))
        stats.count += 1
        stats.sum_ms += elapsed_ms
        stats.buckets[_bucket(LATENCY_BUCKETS_MS, elapsed_ms)] += 1

    def observe_awaited(self, api_key: int, bytes_in: int, parts: Any, local_ms: float,
                        total_ms: float) -> None:
        """A request answered by a coroutine: ``local_ms`` until the handler returned it."""
        stats = self.stats.get(api_key)
        if stats is None:
            stats = self.stats[api_key] = _Stats()
        stats.bytes_in += bytes_in
        if parts is not None:
            stats.bytes_out += len(parts) if isinstance(parts, _BUFFERS) else sum(map(len, parts))
        stats.awaited += 1
        stats.awaited_ms += total_ms
        stats.awaited_local_ms += local_ms
        stats.awaited_total[_bucket(LATENCY_BUCKETS_MS, total_ms)] += 1
        stats.awaited_local[_bucket(LATENCY_BUCKETS_MS, local_ms)] += 1
        stats.awaited_remote[_bucket(LATENCY_BUCKETS_MS, total_ms - local_ms)] += 1

    def count_errors(self, api_key: int, answer: object) -> None:
        """Every error code of one response (Kafka's ErrorsPerSec)."""
        counts = self.errors.get(api_key)
        if counts is None:
            counts = self.errors[api_key] = {}
        count_error_codes(answer, counts)

    def count_error(self, api_key: int, code: int, n: int = 1) -> None:
        counts = self.errors.get(api_key)
        if counts is None:
            counts = self.errors[api_key] = {}
        counts[code] = counts.get(code, 0) + n

    def wrap(self, dispatch: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``dispatch(frame, conn)`` that also records each request's API, time and bytes."""
        observe = self.observe
        observe_awaited = self.observe_awaited
        clock = time.perf_counter

        async def finish(key: int, size: int, t0: float, t1: float,
                         result: Awaitable[Any]) -> Any:
            parts = await result
            observe_awaited(key, size, parts, (t1 - t0) * 1000, (clock() - t0) * 1000)
            return parts

        def timed(frame: Any, conn: Any) -> Any:
            t0 = clock()
            result = dispatch(frame, conn)
            # A tuple of types, not ``list | bytes``: that builds a new union object per call.
            if result is None or isinstance(result, _ANSWERED):
                observe((frame[0] << 8) | frame[1], len(frame), result, (clock() - t0) * 1000)
                return result
            return finish((frame[0] << 8) | frame[1], len(frame), t0, clock(), result)

        return timed

    def collect(self) -> Iterable[Metric]:
        labels = ["request"]
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests received, by API (Kafka RequestsPerSec)",
                                       labels=labels)
        latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                        "Time from a request's arrival to its response, ms "
                                        "(Kafka TotalTimeMs)", labels=labels)
        local = HistogramMetricFamily("kafka_network_requestmetrics_localtimems",
                                      "Time the broker worked on a request before it answered "
                                      "or parked it, ms (Kafka LocalTimeMs)", labels=labels)
        remote = HistogramMetricFamily("kafka_network_requestmetrics_remotetimems",
                                       "Time a parked request waited (acks=all replication, "
                                       "long-poll fetch, a coordinator), ms (Kafka "
                                       "RemoteTimeMs)", labels=labels)
        size_in = CounterMetricFamily("floodmark_request_bytes",
                                      "Request bytes received, by API", labels=labels)
        size_out = CounterMetricFamily("floodmark_response_bytes",
                                       "Response bytes sent, by API", labels=labels)
        for key, s in sorted(list(self.stats.items())):
            name = [request_name(key)]
            requests.add_metric(name, s.count + s.awaited)
            (total_buckets, total_ms), (local_buckets, local_ms), (remote_buckets, remote_ms) = \
                s.histograms()
            latency.add_metric(name, _histogram(total_buckets), total_ms)
            local.add_metric(name, _histogram(local_buckets), local_ms)
            remote.add_metric(name, _histogram(remote_buckets), remote_ms)
            size_in.add_metric(name, s.bytes_in)
            size_out.add_metric(name, s.bytes_out)
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, by API and error, NONE included "
                                     "(Kafka ErrorsPerSec)", labels=["request", "error"])
        for key, codes in sorted(list(self.errors.items())):
            for code, n in sorted(list(codes.items())):
                errors.add_metric([request_name(key), error_name(code)], n)
        yield requests
        yield latency
        yield local
        yield remote
        yield size_in
        yield size_out
        yield errors


def serve_metrics(collectors: Sequence[Collector], listen: str, *,
                  keystore: str | None = None, password: str | None = None,
                  user: str = "prometheus") -> tuple[str, int]:
    """Serve ``collectors`` on ``listen`` (HOST:PORT, port 0 = any; a bad one is a
    BadAddress, before anything starts); returns (host, port). ``keystore``: a PEM file with the
    certificate (chain) and key, to serve HTTPS (TLS 1.2+); ``password``: every scrape must carry
    HTTP Basic credentials (``user`` and it; Prometheus's ``basic_auth``), else 401."""
    host, port = parse_host_port(listen, what="--metrics-listen")
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    if keystore is None and password is None:
        server, _thread = start_http_server(port, addr=host, registry=registry)
        return host, int(server.server_port)
    import ssl
    import threading
    from wsgiref.simple_server import make_server

    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

    app = make_wsgi_app(registry)
    if password is not None:
        app = _basic_auth(app, user, password)
    httpd = make_server(host, port, app, ThreadingWSGIServer, handler_class=_SilentHandler)
    if keystore is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(keystore)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True).start()
    return host, int(httpd.server_port)


def _basic_auth(app: Any, user: str, password: str) -> Any:
    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        if basic_auth_ok(environ.get("HTTP_AUTHORIZATION"), user, password):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="floodmark"'),
                                            ("Content-Type", "text/plain")])
        return [b"a password is needed: HTTP Basic\n"]
    return guarded
