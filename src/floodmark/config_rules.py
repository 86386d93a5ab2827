"""Kafka's validators of config values (ConfigDef's ``atLeast``, ``between``, ``in``,
``ValidList.in`` and the few of its own), and ``RULES``: the one table of which setting gets
which, by Kafka's name.

A rule sees a value already of its setting's type (``floodmark.settings`` parses text to the
type first: "Not a number of type LONG" is the type's refusal, not a rule's) and answers None or
why not. ``refusal`` words it as Kafka's ConfigException does:
``Invalid value -5 for configuration retention.ms: Value must be at least -1``.

Topic configs are keyed by their topic name; ``floodmark.settings`` applies a topic config's
rule to the broker setting it defaults from too (``log.cleanup.policy`` gets ``cleanup.policy``'s),
as Kafka checks a dynamic broker default by building a topic's LogConfig from it. Broker-only
settings are keyed by their own name. The bounds are Kafka's (LogConfig, ServerLogConfigs and the
coordinators' configs); where floodmark's differ the entry says why.

At the bottom of the layers: no floodmark imports, so the CLI checks a value before it sends it
without loading the broker's or the storage's modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from floodmark.constants import RACK_AWARE_REPLICA_SELECTOR


class Rule(Protocol):
    def reject(self, value: Any) -> tuple[str, str] | None:
        """None if ``value`` (typed) passes; else the value as Kafka shows it, and why not."""


def _number(value: Any) -> str:
    """A bound or value as Java prints it (a whole float without its ``.0``: ``between(0, 1)``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


@dataclass(frozen=True, slots=True)
class Between:
    """ConfigDef.Range: ``atLeast(low)`` (no ``high``) or ``between(low, high)``."""

    low: int | float | None = None
    high: int | float | None = None

    def reject(self, value: Any) -> tuple[str, str] | None:
        if self.low is not None and value < self.low:
            return str(value), f"Value must be at least {_number(self.low)}"
        if self.high is not None and value > self.high:
            return str(value), f"Value must be no more than {_number(self.high)}"
        return None


def at_least(low: int | float) -> Between:
    return Between(low, None)


@dataclass(frozen=True, slots=True)
class OneOf:
    """ConfigDef.ValidString.in: one of these strings, case as written
    (``any_case``: ConfigDef.CaseInsensitiveValidString.in)."""

    choices: tuple[str, ...]
    any_case: bool = False

    def reject(self, value: Any) -> tuple[str, str] | None:
        if str(value) in self.choices or (
                self.any_case and str(value).lower() in {c.lower() for c in self.choices}):
            return None
        return str(value), f"String must be one of: {', '.join(self.choices)}"


@dataclass(frozen=True, slots=True)
class ListOf:
    """ConfigDef.ValidList.in: a comma-separated list whose every item is one of these; the
    first item that is not is the one named. ``empty_allowed``: an empty list is a value (Kafka
    4.1's ``cleanup.policy``: neither delete nor compact, so nothing is ever removed but what
    DeleteRecords removes); otherwise it is refused."""

    choices: tuple[str, ...]
    empty_allowed: bool = False

    def reject(self, value: Any) -> tuple[str, str] | None:
        items = [item.strip() for item in str(value).split(",")]
        if items == [""]:
            if self.empty_allowed:
                return None
            return "[]", f"List must name at least one of: {', '.join(self.choices)}"
        for item in items:
            if item not in self.choices:
                return item, f"String must be one of: {', '.join(self.choices)}"
        return None


@dataclass(frozen=True, slots=True)
class GzipLevel:
    """Kafka's GzipCompression.LevelValidator: 1 to 9, or -1 (zlib's default)."""

    def reject(self, value: Any) -> tuple[str, str] | None:
        if value == -1 or 1 <= value <= 9:
            return None
        return str(value), "Value must be between 1 and 9 or equal to -1"


_REPLICA = re.compile(r"[0-9]+:[0-9]+")


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` items."""

    name: str

    def reject(self, value: Any) -> tuple[str, str] | None:
        items = [item.strip() for item in str(value).split(",")]
        if "".join(items) in ("", "*") or all(_REPLICA.fullmatch(i) for i in items):
            return None
        return (f"[{', '.join(items)}]",
                f"{self.name} must be the literal '*' or a list of replicas in the following "
                f"format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


NO_TIERED_STORAGE = ("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                     "configured with remote log storage.")


@dataclass(frozen=True, slots=True)
class NoTieredStorage:
    """``remote.storage.enable=true``: refused as Kafka refuses it on a broker whose
    remote.log.storage.system.enable is false (floodmark has no tiered storage). Kafka's
    message here is a whole sentence, not an "Invalid value" line: ``refusal`` knows."""

    def reject(self, value: Any) -> tuple[str, str] | None:
        return (str(value), NO_TIERED_STORAGE) if value is True else None


# ISO-8601 durations as Java's Duration.parse reads them (PnDTnHnMn.nS, case-insensitive).
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
    r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)
BY_DURATION = "by_duration:"


def iso_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration (Java's ``Duration.parse``: ``P1D``, ``PT1H30M``, ``PT0.5S``) in
    milliseconds; None when ``text`` is not one."""
    m = _ISO_DURATION.fullmatch(text)
    if m is None or (m.group(3) is not None and m.group(3).upper() == "T"):
        return None  # "PT", "P1DT": a T with no time section
    days, _t, hours, minutes, seconds, fraction = m.group(2, 3, 4, 5, 6, 7)
    if days is None and hours is None and minutes is None and seconds is None:
        return None
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
    sign = -1 if seconds is not None and seconds.startswith("-") else 1
    ms += int(seconds or 0) * 1000 + sign * int(((fraction or "") + "000")[:3])
    return -ms if m.group(1) == "-" else ms


@dataclass(frozen=True, slots=True)
class ShareAutoOffsetReset:
    """Kafka's ShareGroupAutoOffsetResetStrategy.Validator: ``earliest``, ``latest`` or
    ``by_duration:<ISO-8601 duration>`` (not negative); case as written."""

    def reject(self, value: Any) -> tuple[str, str] | None:
        text = str(value)
        if text in ("earliest", "latest"):
            return None
        if text.startswith(BY_DURATION):
            ms = iso_duration_ms(text[len(BY_DURATION):])
            if ms is not None and ms >= 0:
                return None
        return text, (f"Invalid value `{text}` for configuration share.auto.offset.reset. The "
                      f"value must be either 'earliest', 'latest' or of the format "
                      f"'by_duration:<PnDTnHnMn.nS>'.")


# compression.type: Kafka's BrokerCompressionType names, in Kafka's order.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")

RULES: dict[str, Rule] = {
    # -- topic configs (Kafka's LogConfig); their broker defaults get the same rule.
    # Kafka 4.1's floor is 1048576 (1 MiB; its own tests lower it through an internal
    # setting); floodmark keeps storage's own floor, one v2 batch header (61 bytes), so that
    # tests, the simulator and demos can roll segments of a few records
    # (docs/kafka-differences.md).
    "segment.bytes": at_least(61),
    "segment.ms": at_least(1),
    "segment.jitter.ms": at_least(0),
    "segment.index.bytes": at_least(4),
    "flush.messages": at_least(1),
    "flush.ms": at_least(0),
    "retention.ms": at_least(-1),  # -1: no time limit; retention.bytes has no bound (Kafka's)
    "max.message.bytes": at_least(0),
    "index.interval.bytes": at_least(0),
    "delete.retention.ms": at_least(0),
    "min.compaction.lag.ms": at_least(0),
    "max.compaction.lag.ms": at_least(1),
    "file.delete.delay.ms": at_least(0),
    "min.cleanable.dirty.ratio": Between(0, 1),
    "cleanup.policy": ListOf(CLEANUP_POLICIES, empty_allowed=True),
    "min.insync.replicas": at_least(1),
    "compression.type": OneOf(COMPRESSION_TYPES),
    "compression.gzip.level": GzipLevel(),
    "compression.lz4.level": Between(1, 17),
    "compression.zstd.level": Between(-131072, 22),
    "message.timestamp.type": OneOf(TIMESTAMP_TYPES),
    "message.timestamp.before.max.ms": at_least(0),
    "message.timestamp.after.max.ms": at_least(0),
    "leader.replication.throttled.replicas":
        ThrottledReplicas("leader.replication.throttled.replicas"),
    "follower.replication.throttled.replicas":
        ThrottledReplicas("follower.replication.throttled.replicas"),
    "remote.storage.enable": NoTieredStorage(),
    "local.retention.ms": at_least(-2),  # -2: retention.ms
    "local.retention.bytes": at_least(-2),
    # -- broker-only settings (ServerLogConfigs, the coordinators', the socket server's)
    "num.partitions": at_least(1),
    "log.roll.hours": at_least(1),
    "log.roll.jitter.hours": at_least(0),
    "log.retention.check.interval.ms": at_least(1),
    "log.cleaner.backoff.ms": at_least(0),
    # Kafka has no bound here; a cleaner needs room for one key's entry.
    "log.cleaner.dedupe.buffer.size": at_least(1),
    "socket.request.max.bytes": at_least(1),
    "offsets.topic.num.partitions": at_least(1),
    "offsets.retention.minutes": at_least(1),
    "group.max.size": at_least(1),
    "group.consumer.max.size": at_least(1),
    "group.share.max.size": Between(1, 1000),
    "group.consumer.session.timeout.ms": at_least(1),
    "group.consumer.heartbeat.interval.ms": at_least(1),
    "group.consumer.min.session.timeout.ms": at_least(1),
    "group.consumer.max.session.timeout.ms": at_least(1),
    "group.consumer.min.heartbeat.interval.ms": at_least(1),
    "group.consumer.migration.policy": OneOf(
        ("bidirectional", "upgrade", "downgrade", "disabled"), any_case=True),
    "group.consumer.max.heartbeat.interval.ms": at_least(1),
    "group.streams.session.timeout.ms": at_least(1),
    "group.streams.heartbeat.interval.ms": at_least(1),
    "group.streams.min.session.timeout.ms": at_least(1),
    "group.streams.max.session.timeout.ms": at_least(1),
    "group.streams.min.heartbeat.interval.ms": at_least(1),
    "group.streams.max.heartbeat.interval.ms": at_least(1),
    "group.streams.num.standby.replicas": at_least(0),
    "group.streams.max.standby.replicas": at_least(0),
    "group.streams.initial.rebalance.delay.ms": at_least(0),
    # Kafka's bounds for share groups (GroupCoordinatorConfig / ShareGroupConfig)
    "group.share.session.timeout.ms": at_least(1),
    "group.share.heartbeat.interval.ms": at_least(1),
    "group.share.record.lock.duration.ms": Between(1000, 3_600_000),
    "group.share.delivery.count.limit": Between(2, 10),
    "group.share.partition.max.record.locks": Between(100, 10_000),
    "group.share.min.session.timeout.ms": at_least(1),
    "group.share.max.session.timeout.ms": at_least(1),
    "group.share.min.heartbeat.interval.ms": at_least(1),
    "group.share.max.heartbeat.interval.ms": at_least(1),
    "group.share.min.record.lock.duration.ms": Between(1000, 30_000),
    "group.share.max.record.lock.duration.ms": Between(30_000, 3_600_000),
    "group.share.min.delivery.count.limit": Between(2, 5),
    "group.share.max.delivery.count.limit": Between(5, 25),
    "group.share.min.partition.max.record.locks": Between(100, 2_000),
    "group.share.max.partition.max.record.locks": Between(2_000, 10_000),
    # -- group configs (ConfigResource type GROUP, Kafka's GroupConfig; KIP-848, KIP-932,
    # KIP-1071): the ConfigDef's own check; the broker's min/max settings above bound them
    # further (``floodmark.group_configs``). share.auto.offset.reset and share.isolation.level
    # are broker settings too in floodmark (the default of every share group).
    "consumer.session.timeout.ms": at_least(1),
    "consumer.heartbeat.interval.ms": at_least(1),
    "share.session.timeout.ms": at_least(1),
    "share.heartbeat.interval.ms": at_least(1),
    "share.record.lock.duration.ms": at_least(1000),
    "share.delivery.count.limit": at_least(2),
    "share.partition.max.record.locks": at_least(100),
    "share.auto.offset.reset": ShareAutoOffsetReset(),
    "streams.session.timeout.ms": at_least(1),
    "streams.heartbeat.interval.ms": at_least(1),
    "streams.num.standby.replicas": at_least(0),
    "streams.initial.rebalance.delay.ms": at_least(0),
    # KIP-392: the one selector floodmark has (Kafka loads any class; unset: the leader)
    "replica.selector.class": OneOf((RACK_AWARE_REPLICA_SELECTOR,)),
    # Kafka's GroupConfig order (its message lists them so)
    "share.isolation.level": OneOf(("read_committed", "read_uncommitted")),
    "share.coordinator.state.topic.num.partitions": at_least(1),
    "share.coordinator.state.topic.replication.factor": at_least(1),
    "share.coordinator.state.topic.min.isr": at_least(1),
    "transactional.id.expiration.ms": at_least(1),
    "transaction.max.timeout.ms": at_least(1),
    "transaction.state.log.num.partitions": at_least(1),
    "transaction.state.log.replication.factor": at_least(1),
    "transaction.state.log.min.isr": at_least(1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": at_least(1),
    "max.incremental.fetch.session.cache.slots": at_least(0),
    # Replica fetching (ReplicationConfigs). Kafka has no bound on the fetcher count, the min
    # bytes or the wait; floodmark refuses a count below one (no fetcher would follow anything)
    # and a negative wait or min bytes.
    "num.replica.fetchers": at_least(1),
    "num.network.threads": at_least(1),  # Kafka's atLeast(1) (SocketServerConfigs)
    "replica.fetch.max.bytes": at_least(0),
    "replica.fetch.response.max.bytes": at_least(0),
    "replica.fetch.min.bytes": at_least(0),
    "replica.fetch.wait.max.ms": at_least(0),
    "replica.fetch.backoff.ms": at_least(0),
    "min.incremental.fetch.session.eviction.ms": at_least(0),
    "quota.window.num": at_least(1),
    "quota.window.size.seconds": at_least(1),
    "process.roles": ListOf(("broker", "controller")),
    "eligible.leader.replicas.version": Between(0, 1),
}


# Topic configs whose rule their broker default does not share: Kafka defines
# ``log.retention.ms`` without a validator (a negative broker default is "no time limit", as
# Kafka 4.1.1 takes ``log.retention.ms=-5``), where ``retention.ms`` is at least -1.
NOT_FOR_BROKER_DEFAULT = frozenset({"retention.ms"})


def refusal(rule: Rule, name: str, value: Any) -> str | None:
    """Why ``value`` (typed) is not a value of ``name`` under ``rule``, in Kafka's words; None
    when it is one."""
    rejected = rule.reject(value)
    if rejected is None:
        return None
    shown, why = rejected
    if why == NO_TIERED_STORAGE:
        return why
    return f"Invalid value {shown} for configuration {name}: {why}"
