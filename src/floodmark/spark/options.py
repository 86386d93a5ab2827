"""Source/sink options with the names of Spark's Kafka connector, parsed once into values.

Offsets use Spark's JSON shape, ``{"topic": {"0": 42}}``, with -2 = earliest and -1 = latest.
All Spark option keys arrive lower-cased; lookups here are case-insensitive.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from floodmark.spark.fetcher import ClientConfig
from floodmark.spark.protocol import isolation_from_config

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1

Offsets = dict[str, dict[str, int]]  # topic -> partition (as a string) -> offset


class OptionError(ValueError):
    """A source or sink option is missing or malformed."""


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


def _int(options: Mapping[str, str], name: str) -> int | None:
    v = _get(options, name)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {v!r}") from None


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """All ``kafka.*`` options with the prefix stripped (Kafka client settings)."""
    return {k[len("kafka."):].lower(): v for k, v in options.items() if k.lower().startswith("kafka.")}


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
        return {str(t): {str(int(p)): int(o) for p, o in ps.items()} for t, ps in spec.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise OptionError(f'{what} must be "earliest", "latest" or JSON like '
                          f'{{"topic":{{"0":42}}}}, not {value!r}') from exc


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
    "fetch.max.wait.ms", "fetch.wait.max.ms", "security.protocol",
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


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    params = kafka_params(options)
    servers = params.get("bootstrap.servers")
    if not servers:
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    for bad in ("group.id", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                "value.deserializer"):
        if bad in params:
            raise OptionError(f"option 'kafka.{bad}' is not supported: the source tracks offsets "
                              "itself (use startingOffsets / the checkpoint)")
    proto = params.get("security.protocol", "plaintext").lower()
    secure = [k for k in params if k.startswith(("sasl.", "ssl."))]
    if proto != "plaintext" or secure:
        raise OptionError("the floodmark reader speaks the Kafka protocol over PLAINTEXT only; "
                          f"security.protocol={proto!r} / {secure} are not supported")
    unused = sorted(set(params) - _READER_PARAMS)
    if unused:
        log.info("kafka.* settings not used by the reader (the sink passes all to librdkafka): %s",
                 unused)
    client = ClientConfig(
        bootstrap_servers=servers,
        client_id=params.get("client.id", "floodmark-spark"),
        request_timeout_ms=int(params.get("request.timeout.ms", "30000")),
        isolation_level=isolation_from_config(params.get("isolation.level")),
        fetch_max_bytes=int(params.get("fetch.max.bytes", str(2 * 1024 * 1024))),
        max_wait_ms=int(params.get("fetch.max.wait.ms", params.get("fetch.wait.max.ms", "500"))),
        poll_timeout_ms=_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        truncation_grace_ms=_int(options, "floodmark.truncationGraceMs") or 10_000,
    )
    starting = parse_offset_spec(options, "starting", "latest" if streaming else "earliest")
    ending = parse_offset_spec(options, "ending", "latest")
    if not streaming and starting.kind == "latest":
        raise OptionError("startingOffsets='latest' is not allowed for a batch query")
    if not streaming and ending.kind == "earliest":
        raise OptionError("endingOffsets='earliest' is not allowed for a batch query")
    if streaming and any(_get(options, n) is not None for n in (
            "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")):
        raise OptionError("ending offsets are not allowed for a streaming query")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be 'error' or 'latest'")
    max_per = _int(options, "maxOffsetsPerTrigger")
    min_per = _int(options, "minOffsetsPerTrigger")
    for name, v in (("maxOffsetsPerTrigger", max_per), ("minOffsetsPerTrigger", min_per)):
        if v is not None and v <= 0:
            raise OptionError(f"{name} must be positive")
    min_parts = _int(options, "minPartitions")
    if min_parts is not None and min_parts <= 0:
        raise OptionError("minPartitions must be positive")
    return SourceOptions(
        client=client,
        subscription=parse_subscription(options),
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=max_per,
        min_offsets_per_trigger=min_per,
        max_trigger_delay_ms=_duration_ms(_get(options, "maxTriggerDelay"), 15 * 60_000),
        min_partitions=min_parts,
    )


@dataclass(frozen=True)
class SinkOptions:
    topic: str | None
    producer_config: tuple[tuple[str, str], ...]
    flush_timeout_ms: int


# librdkafka settings the sink insists on: what makes its delivery guarantee true.
_FORCED_PRODUCER = {"acks": "all", "enable.idempotence": "true"}


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    params = kafka_params(options)
    if not params.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    for k, v in _FORCED_PRODUCER.items():
        if k in params and params[k].lower() not in (v, "-1" if k == "acks" else v):
            raise OptionError(f"kafka.{k}={params[k]} is not allowed: the floodmark sink always "
                              f"writes with {k}={v}")
    for bad in ("key.serializer", "value.serializer", "transactional.id"):
        if bad in params:
            raise OptionError(f"option 'kafka.{bad}' is not supported")
    conf = {"partitioner": "murmur2_random", "linger.ms": "5", "client.id": "floodmark-spark-sink"}
    conf.update(params)
    conf.update(_FORCED_PRODUCER)
    return SinkOptions(
        topic=_get(options, "topic"),
        producer_config=tuple(sorted(conf.items())),
        flush_timeout_ms=_int(options, "floodmark.flushTimeoutMs") or 120_000,
    )
