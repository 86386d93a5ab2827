"""Source/sink options with the names of Spark's Kafka connector, parsed once into values.

Offsets use Spark's JSON shape, ``{"topic": {"0": 42}}``, with -2 = earliest and -1 = latest.
All Spark option keys arrive lower-cased; lookups here are case-insensitive.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from floodmark.client import BadAddress, NoBrokerAvailable, parse_bootstrap
from floodmark.compression import Compression
from floodmark.constants import EARLIEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from floodmark.errors import FloodmarkError
from floodmark.spark.fetcher import (
    FETCH_MAX_BYTES,
    STREAM_FETCH_MAX_BYTES,
    ClientConfig,
    SecurityProperties,
    security_of,
)

log = logging.getLogger(__name__)


Offsets = dict[str, dict[str, int]]  # topic -> partition (as a string) -> offset


class OptionError(FloodmarkError, ValueError):
    """A source or sink option is missing or malformed."""


class BrokerUnreachable(FloodmarkError, ConnectionError):
    """No address of ``kafka.bootstrap.servers`` answered when the query was planned."""


P = ParamSpec("P")
R = TypeVar("R")


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Show an OptionError raised by ``fn`` as one line, without a traceback.

    ``fn`` runs in a PySpark planner process (``DataSource.schema()`` at ``load()``, ``reader()``,
    ``writer()``...), which sends the error to the JVM formatted by pyspark's
    ``handle_worker_exception``; with ``SPARK_HIDE_TRACEBACK`` set (what Spark's
    ``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` sets) it sends only
    ``OptionError: <message>``. A user's mistake is not a program error: no stack of frames.
    A bootstrap that nobody answers at (a wrong address, a cluster that is down) is one line
    too, ``BrokerUnreachable``, with what to check.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except OptionError as exc:
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise OptionError(str(exc)) from None
        except NoBrokerAvailable as exc:
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise BrokerUnreachable(f"{exc} (is the cluster up, and is kafka.bootstrap.servers "
                                    f"its address?)") from None

    return wrapper


def _get(options: Mapping[str, str], name: str) -> str | None:
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = _get(options, name)
    if v is None:
        return default
    if v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, not {v!r}")


def _int(options: Mapping[str, str], name: str, *, minimum: int | None = None) -> int | None:
    v = _get(options, name)
    if v is None:
        return None
    try:
        n = int(v.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {v!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {n}")
    return n


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """All ``kafka.*`` options with the prefix stripped (Kafka client settings)."""
    return {k[len("kafka."):].lower(): v for k, v in options.items() if k.lower().startswith("kafka.")}


def _is_security(name: str) -> bool:
    return name == "security.protocol" or name.startswith(("ssl.", "sasl."))


def security_properties(params: Mapping[str, str]) -> SecurityProperties:
    """``kafka.security.protocol``, ``kafka.ssl.*`` and ``kafka.sasl.*`` passed through to the
    client, as Spark's Kafka source passes them to its consumers and producers: librdkafka's
    names (``sasl.mechanisms``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``) or
    the Java client's (``sasl.mechanism``, ``sasl.jaas.config``, PEM
    ``ssl.truststore.location``). Checked here (files exist, a mechanism and a user for SASL):
    a mistake is one line that never shows a password."""
    props = tuple(sorted((k, v) for k, v in params.items() if _is_security(k)))
    try:
        security_of(props)
    except ValueError as exc:
        raise OptionError(f"kafka.* security options: {exc}") from None
    return props


@dataclass(frozen=True)
class Subscription:
    """Exactly one of subscribe / subscribePattern / assign, like Spark's Kafka source."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {k: _get(options, k) for k in ("subscribe", "subscribePattern", "assign")}
    present = [k for k, v in given.items() if v is not None]
    if len(present) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
                          f"must be given, got {present or 'none'}")
    kind = present[0]
    value = given[kind] or ""
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe names no topic")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"subscribePattern {value!r} is not a regular expression: {exc}") from exc
        return Subscription(kind, pattern=value)
    try:
        spec = json.loads(value)
        assigned = tuple(sorted((str(t), int(p)) for t, ps in spec.items() for p in ps))
    except (ValueError, AttributeError, TypeError) as exc:
        raise OptionError(f'assign must be JSON like {{"topicA":[0,1]}}, not {value!r}') from exc
    if not assigned:
        raise OptionError("option assign names no partition")
    return Subscription(kind, assigned=assigned)


def parse_offsets_json(value: str, what: str) -> Offsets:
    try:
        spec = json.loads(value)
        out = {str(t): {str(int(p)): int(o) for p, o in ps.items()} for t, ps in spec.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f'{what} must be "earliest", "latest" or JSON like '
                          f'{{"topic":{{"0":42}}}}, not {value!r}') from None
    if not out or not all(out.values()):
        raise OptionError(f"{what} names no partition: {value!r}")
    for t, ps in out.items():
        for p, o in ps.items():
            if int(p) < 0:
                raise OptionError(f"{what}: partition {p} of {t} is negative")
            if "Timestamp" not in what and o < EARLIEST_TIMESTAMP:
                raise OptionError(f"{what}: offset {o} of {t}-{p} must be >= 0, or -1 (latest) "
                                  "or -2 (earliest)")
            if what == "endingOffsets" and o == EARLIEST_TIMESTAMP:
                raise OptionError(f"{what}: -2 (earliest) is not allowed as an ending offset "
                                  f"({t}-{p})")
    return out


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range begins or ends before it is resolved against the broker."""

    kind: str  # "earliest" | "latest" | "json" | "timestamp" | "timestamp_json"
    offsets: tuple[tuple[str, str, int], ...] = ()  # (topic, partition, offset or timestamp)
    timestamp: int = 0

    def lookup(self, topic: str, partition: int) -> int | None:
        for t, p, o in self.offsets:
            if t == topic and p == str(partition):
                return o
        return None


def _flatten(o: Offsets) -> tuple[tuple[str, str, int], ...]:
    return tuple((t, p, v) for t, ps in sorted(o.items()) for p, v in sorted(ps.items()))


def parse_offset_spec(options: Mapping[str, str], prefix: str, default: str) -> OffsetSpec:
    """``prefix`` is "starting" or "ending": reads <prefix>Offsets / <prefix>Timestamp /
    <prefix>OffsetsByTimestamp (timestamps win over offsets, as in Spark)."""
    ts = _get(options, f"{prefix}Timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise OptionError(f"{prefix}Timestamp must be milliseconds since the epoch") from None
    by_ts = _get(options, f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamp_json",
                          offsets=_flatten(parse_offsets_json(by_ts, f"{prefix}OffsetsByTimestamp")))
    value = (_get(options, f"{prefix}Offsets") or default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    return OffsetSpec("json", offsets=_flatten(parse_offsets_json(value, f"{prefix}Offsets")))


@dataclass(frozen=True)
class SourceOptions:
    client: ClientConfig
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str  # startingOffsetsByTimestampStrategy: "error" | "latest"
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None


_READER_PARAMS = {
    "bootstrap.servers", "client.id", "request.timeout.ms", "isolation.level", "fetch.max.bytes",
    "fetch.max.wait.ms", "fetch.wait.max.ms", "security.protocol", "group.id", "check.crcs",
}

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")


def _duration_ms(value: str | None, default_ms: int) -> int:
    if value is None:
        return default_ms
    m = _DURATION.match(value.lower())
    if not m:
        raise OptionError(f"maxTriggerDelay must look like '15m', '30s' or '500ms', not {value!r}")
    n, unit = int(m.group(1)), m.group(2) or "ms"
    return n * {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}[unit]


def _isolation(value: str | None) -> int:
    if value is None or value.strip().lower() == "read_uncommitted":
        return READ_UNCOMMITTED
    if value.strip().lower() == "read_committed":
        return READ_COMMITTED
    raise OptionError("kafka.isolation.level must be read_committed or read_uncommitted, "
                      f"not {value!r}")


# Spark's Kafka source refuses these: the source tracks offsets itself, in the checkpoint.
_REFUSED = ("auto.offset.reset", "enable.auto.commit", "key.deserializer", "value.deserializer",
            "interceptor.classes")


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Every source option checked and parsed. ``streaming=None`` (at ``load()``, where Spark
    has not said which kind of query it is) checks all but the batch-only and stream-only
    rules; those are checked again when the reader is made."""
    params = kafka_params(options)
    servers = params.get("bootstrap.servers")
    if not servers or not servers.strip():
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    _check_bootstrap(servers)
    for bad in _REFUSED:
        if bad in params:
            raise OptionError(f"option 'kafka.{bad}' is not supported: the source tracks offsets "
                              "itself (use startingOffsets / the checkpoint)")
    if "group.id" in params or _get(options, "groupIdPrefix") is not None:
        # Spark >= 3.0 accepts both (they name the consumer group of its Kafka consumers);
        # this source joins no group and commits no offsets, so they change nothing.
        log.info("kafka.group.id / groupIdPrefix accepted; the floodmark source uses no "
                 "consumer group (offsets live in Spark's checkpoint)")
    security = security_properties(params)
    unused = sorted(k for k in set(params) - _READER_PARAMS if not _is_security(k))
    if unused:
        log.info("kafka.* settings not used by the reader: %s", unused)
    client = ClientConfig(
        bootstrap_servers=servers,
        client_id=params.get("client.id", "floodmark-spark"),
        request_timeout_ms=_int(options, "kafka.request.timeout.ms", minimum=1) or 30_000,
        isolation_level=_isolation(params.get("isolation.level")),
        fetch_max_bytes=(_int(options, "kafka.fetch.max.bytes", minimum=1)
                         or (STREAM_FETCH_MAX_BYTES if streaming else FETCH_MAX_BYTES)),
        max_wait_ms=_first_int(options, ("kafka.fetch.max.wait.ms", "kafka.fetch.wait.max.ms"),
                               500),
        poll_timeout_ms=_int(options, "kafkaConsumer.pollTimeoutMs", minimum=1) or 120_000,
        truncation_grace_ms=_first_int(options, ("floodmark.truncationGraceMs",), 10_000),
        check_crcs=_bool(options, "kafka.check.crcs", True),
        security_properties=security,
    )
    subscription = parse_subscription(options)
    starting = parse_offset_spec(options, "starting", "latest" if streaming else "earliest")
    ending = parse_offset_spec(options, "ending", "latest")
    if streaming is False and starting.kind == "latest":
        raise OptionError("startingOffsets='latest' is not allowed for a batch query")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets='earliest' is not allowed (a batch query ends at "
                          "'latest' or at JSON offsets)")
    if streaming and any(_get(options, n) is not None for n in (
            "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")):
        raise OptionError("ending offsets are not allowed for a streaming query")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be 'error' or 'latest', "
                          f"not {strategy!r}")
    return SourceOptions(
        client=client,
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=_int(options, "minOffsetsPerTrigger", minimum=1),
        max_trigger_delay_ms=_duration_ms(_get(options, "maxTriggerDelay"), 15 * 60_000),
        min_partitions=_int(options, "minPartitions", minimum=1),
    )


def _first_int(options: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    for name in names:
        v = _int(options, name, minimum=0)
        if v is not None:
            return v
    return default


def _check_bootstrap(servers: str) -> None:
    try:
        parse_bootstrap(servers)
    except BadAddress as exc:
        raise OptionError(f"kafka.bootstrap.servers: {exc}") from None


@dataclass(frozen=True)
class SinkOptions:
    topic: str | None
    bootstrap_servers: str
    client_id: str
    request_timeout_ms: int
    flush_timeout_ms: int
    compression: Compression
    security_properties: SecurityProperties = field(default=(), repr=False)
    """TLS / SASL settings (``security_properties``; passwords: never in a repr)."""


# The sink is Kafka's idempotent producer with acks=all (floodmark.client.producer); settings
# that would weaken that are refused, as are the ones a Python sink cannot have.
_SINK_REFUSED = ("key.serializer", "value.serializer", "transactional.id")
_SINK_PARAMS = {"bootstrap.servers", "client.id", "request.timeout.ms", "delivery.timeout.ms",
                "compression.type", "acks", "enable.idempotence", "linger.ms", "batch.size",
                "security.protocol"}


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    params = kafka_params(options)
    servers = params.get("bootstrap.servers")
    if not servers or not servers.strip():
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    _check_bootstrap(servers)
    acks = params.get("acks", "all").strip().lower()
    if acks not in ("all", "-1"):
        raise OptionError(f"kafka.acks={params['acks']} is not allowed: the floodmark sink always "
                          "writes with acks=all")
    if params.get("enable.idempotence", "true").strip().lower() != "true":
        raise OptionError("kafka.enable.idempotence=false is not allowed: the floodmark sink is "
                          "always the idempotent producer")
    for bad in _SINK_REFUSED:
        if bad in params:
            raise OptionError(f"option 'kafka.{bad}' is not supported")
    security = security_properties(params)
    codec = params.get("compression.type", "none").strip().lower()
    try:
        compression = Compression[codec.upper()]
    except KeyError:
        raise OptionError(f"kafka.compression.type must be none, gzip, snappy, lz4 or zstd, "
                          f"not {codec!r}") from None
    unused = sorted(k for k in set(params) - _SINK_PARAMS if not _is_security(k))
    if unused:
        log.info("kafka.* settings not used by the sink: %s", unused)
    return SinkOptions(
        topic=_get(options, "topic"),
        bootstrap_servers=servers,
        client_id=params.get("client.id", "floodmark-spark-sink"),
        request_timeout_ms=_int(options, "kafka.request.timeout.ms", minimum=1) or 30_000,
        flush_timeout_ms=(_int(options, "floodmark.flushTimeoutMs", minimum=1)
                          or _int(options, "kafka.delivery.timeout.ms", minimum=1) or 120_000),
        compression=compression,
        security_properties=security,
    )
