"""Broker settings: Kafka's names, from defaults < TOML file < ``--set name=value`` flags <
dynamic broker configs (KIP-226: the cluster-wide default, then this broker's own).

``DEFAULTS`` names every setting and its default; ``SETTINGS`` is the typed registry built from
it: each setting's type and whether it may change at runtime (``DYNAMIC``, Kafka's
cluster-wide dynamic configs that floodmark applies live) or is read-only (set at start). The
``--set`` parser, the start-time check (``BrokerConfig.validate``) and the dynamic-config check
(``validate_dynamic``) all read it.
"""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.address import parse_host_port
from floodmark.replication.modes import DEFAULT_TRUNCATION, Truncation

# Broker-level defaults, Kafka's names. Where floodmark differs from Kafka it says why.
DEFAULTS: dict[str, Any] = {
    "node.id": 1,
    "process.roles": "broker,controller",
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "auto.create.topics.enable": True,
    "socket.request.max.bytes": 104_857_600,
    "message.max.bytes": 1_048_588,
    "log.segment.bytes": 1_073_741_824,
    "log.retention.ms": 604_800_000,
    "log.retention.bytes": -1,
    "log.flush.interval.messages": 9_223_372_036_854_775_807,
    "log.flush.interval.ms": None,
    "log.message.timestamp.type": "CreateTime",
    "unclean.leader.election.enable": False,
    # Kafka waits 3000 ms before finishing the first rebalance of an empty group. Clients work
    # either way; a short wait keeps tests and demos quick while still batching joiners.
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1_800_000,
    # Kafka's default is 50 partitions; one keeps a small broker small.
    "offsets.topic.num.partitions": 1,
    "offsets.retention.minutes": 10080,
    "log.checkpoint.interval.ms": 5000,
    # Log compaction (Kafka's names and defaults).
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": True,
    "log.cleaner.backoff.ms": 15000,
    "log.cleaner.dedupe.buffer.size": 134_217_728,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": 9_223_372_036_854_775_807,
    "log.cleaner.delete.retention.ms": 86_400_000,
    "log.retention.check.interval.ms": 300_000,
    "replica.lag.time.max.ms": 30000,
    # Incremental fetch sessions (KIP-227): slots in the cache, and how long a session is kept
    # from eviction by a newcomer (Kafka's names and defaults).
    "max.incremental.fetch.session.cache.slots": 1000,
    "min.incremental.fetch.session.eviction.ms": 120_000,
    "transactional.id.expiration.ms": 604_800_000,
    # The transaction coordinator (KIP-98), Kafka's names. Kafka's __transaction_state has 50
    # partitions; one keeps a small broker small, as for __consumer_offsets. Kafka looks for
    # timed-out transactions every 10 s; every second keeps an abandoned transaction's records
    # from holding back read_committed consumers (the LSO) much past its timeout.
    "transaction.max.timeout.ms": 900_000,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    # floodmark's protocol mode (SPEC §2). Anything but leader-epoch is known to lose or diverge
    # data and needs floodmark.truncation.allow.unsafe=true to start.
    "floodmark.truncation": "leader-epoch",
    "floodmark.truncation.allow.unsafe": False,
    # UNSAFE, off: answer an idempotent producer's retry of a batch already in the log at once,
    # before the high watermark covers it (the bug of issue 8: acknowledged writes lost when the
    # leader is cut off). Only for proving that the fault tests catch it.
    "floodmark.unsafe.ack.duplicates.before.commit": False,
    # UNSAFE, off: keep every write not yet fsynced in this process's memory (a page cache of
    # its own over the real files), so that killing the process loses it as a power cut would
    # (storage/page_cache.py). For floodmark chaos run --faults power-loss only.
    "floodmark.unsafe.power.loss.page.cache": False,
}

LONG_MAX = 9_223_372_036_854_775_807

# Topic-level config names and the broker setting each one defaults from.
TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.insync.replicas": "min.insync.replicas",
    "segment.bytes": "log.segment.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
}


class ConfigType(enum.IntEnum):
    """Kafka's ConfigType (DescribeConfigs v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(enum.IntEnum):
    """Kafka's ConfigSource (DescribeConfigs v1+), most specific first."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# Kafka's cluster-wide dynamic broker configs (DynamicBrokerConfig) that floodmark has and
# applies live: the log defaults of every topic without its own value, the cleaner's pace,
# min.insync.replicas and the controller's unclean-election default.
DYNAMIC: frozenset[str] = frozenset({
    "log.segment.bytes", "log.retention.ms", "log.retention.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.message.timestamp.type",
    "message.max.bytes", "log.cleanup.policy", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms", "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size", "min.insync.replicas", "unclean.leader.election.enable",
})
_INT_SETTINGS = frozenset({"node.id", "num.partitions", "default.replication.factor",
                           "min.insync.replicas", "socket.request.max.bytes", "message.max.bytes",
                           "log.segment.bytes", "group.initial.rebalance.delay.ms",
                           "group.min.session.timeout.ms", "group.max.session.timeout.ms",
                           "offsets.topic.num.partitions", "offsets.retention.minutes",
                           "log.checkpoint.interval.ms", "replica.lag.time.max.ms",
                           "transactional.id.expiration.ms", "transaction.max.timeout.ms",
                           "transaction.state.log.num.partitions",
                           "transaction.state.log.replication.factor",
                           "transaction.state.log.min.isr",
                           "transaction.abort.timed.out.transaction.cleanup.interval.ms"})
_LIST_SETTINGS = frozenset({"log.cleanup.policy", "process.roles"})
_LONG_NULLABLE = frozenset({"log.flush.interval.ms"})


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    type: ConfigType
    dynamic: bool

    def holds(self, value: Any) -> bool:
        """Is ``value`` (typed, from ``--set`` or TOML) of this setting's type?"""
        if self.type is ConfigType.BOOLEAN:
            return isinstance(value, bool)
        if self.type in (ConfigType.INT, ConfigType.LONG):
            return isinstance(value, int) and not isinstance(value, bool)
        if self.type is ConfigType.DOUBLE:
            return isinstance(value, int | float) and not isinstance(value, bool)
        return True

    def parse(self, value: Any) -> Any:
        """A value given as text (AlterConfigs) or typed (TOML) -> the setting's type;
        ValueError with Kafka's wording when it is not one."""
        text = str(value).strip()
        if self.type is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if text.lower() not in ("true", "false"):
                raise ValueError(f"Invalid value {value} for configuration {self.name}: "
                                 f"Expected value to be either true or false")
            return text.lower() == "true"
        if self.type in (ConfigType.INT, ConfigType.LONG):
            try:
                number = int(text)
            except ValueError:
                raise ValueError(f"Invalid value {value} for configuration {self.name}: Not a "
                                 f"number of type {self.type.name}") from None
            if self.type is ConfigType.INT and not -(2**31) <= number < 2**31:
                raise ValueError(f"Invalid value {value} for configuration {self.name}: Not a "
                                 f"number of type INT")
            return number
        if self.type is ConfigType.DOUBLE:
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"Invalid value {value} for configuration {self.name}: Not a "
                                 f"number of type DOUBLE") from None
        return text


def _setting(name: str, default: Any) -> Setting:
    if isinstance(default, bool):
        kind = ConfigType.BOOLEAN
    elif name in _INT_SETTINGS:
        kind = ConfigType.INT
    elif isinstance(default, int) or name in _LONG_NULLABLE:
        kind = ConfigType.LONG
    elif isinstance(default, float):
        kind = ConfigType.DOUBLE
    elif name in _LIST_SETTINGS:
        kind = ConfigType.LIST
    else:
        kind = ConfigType.STRING
    return Setting(name, default, kind, name in DYNAMIC)


def validate_dynamic(configs: Mapping[str, Any], resource: str) -> dict[str, Any]:
    """Check a dynamic broker config set (for broker ``resource``: an id, or "" for the
    cluster-wide default) against the registry; returns it typed. Kafka's refusals, as
    ValueError messages: read-only settings first (the whole resource is refused), then
    unknown names, then values of the wrong type or out of range."""
    fixed = sorted(n for n in configs if n in SETTINGS and not SETTINGS[n].dynamic)
    if fixed:
        raise ValueError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    unknown = sorted(n for n in configs if n not in SETTINGS)
    if unknown:
        raise ValueError(f"Unknown broker config(s): {', '.join(unknown)}")
    typed = {name: SETTINGS[name].parse(value) for name, value in configs.items()}
    if "min.insync.replicas" in typed and typed["min.insync.replicas"] < 1:
        raise ValueError(f"Invalid value {typed['min.insync.replicas']} for configuration "
                         f"min.insync.replicas: Value must be at least 1")
    if typed.get("log.cleaner.backoff.ms", 0) < 0:
        raise ValueError("Invalid value for configuration log.cleaner.backoff.ms: Value must "
                         "be at least 0")
    if typed.get("log.cleaner.dedupe.buffer.size", 1) < 1:
        raise ValueError("Invalid value for configuration log.cleaner.dedupe.buffer.size: "
                         "Value must be at least 1")
    return typed


def render(value: Any) -> str | None:
    """A setting's value as DescribeConfigs shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_value(text: str) -> Any:
    """A ``--set`` value: int, bool, float, or left as a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(low)
    except ValueError:
        pass
    try:
        return float(low)
    except ValueError:
        return text


@dataclass
class DynamicLayer:
    """The dynamic broker configs in force on this broker (typed): the cluster-wide default
    and this broker's own; the metadata records carry them, the broker replaces them."""

    cluster_default: dict[str, Any] = field(default_factory=dict)
    this_broker: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    settings: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    static_names: frozenset[str] = frozenset()
    """Settings given at start (TOML file, ``--set``): STATIC_BROKER_CONFIG."""
    dynamic: DynamicLayer = field(default_factory=DynamicLayer)

    @property
    def node_id(self) -> int:
        return int(self.settings["node.id"])

    def get(self, name: str) -> Any:
        """The value in force: this broker's dynamic value, the cluster-wide dynamic default,
        the static setting, Kafka's default."""
        for layer in (self.dynamic.this_broker, self.dynamic.cluster_default):
            if name in layer:
                return layer[name]
        return self.settings.get(name, DEFAULTS.get(name))

    def sources(self, name: str) -> list[tuple[ConfigSource, Any]]:
        """Where ``name``'s value comes from, most specific first (DescribeConfigs' synonyms):
        every layer that has a value; the first one is in force."""
        out: list[tuple[ConfigSource, Any]] = []
        if name in self.dynamic.this_broker:
            out.append((ConfigSource.DYNAMIC_BROKER_CONFIG, self.dynamic.this_broker[name]))
        if name in self.dynamic.cluster_default:
            out.append((ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                        self.dynamic.cluster_default[name]))
        if name in self.static_names:
            out.append((ConfigSource.STATIC_BROKER_CONFIG, self.settings.get(name)))
        if name in DEFAULTS:
            out.append((ConfigSource.DEFAULT_CONFIG, DEFAULTS[name]))
        elif name not in self.static_names and name in self.settings:
            out.append((ConfigSource.STATIC_BROKER_CONFIG, self.settings[name]))
        return out

    def log_settings(self) -> dict[str, Any]:
        """Every log-level value in force (the base of every topic's LogConfig)."""
        out = {k: v for k, v in self.settings.items() if v is not None}
        for layer in (self.dynamic.cluster_default, self.dynamic.this_broker):
            for name, value in layer.items():
                if value is None:
                    out.pop(name, None)
                else:
                    out[name] = value
        return out

    @property
    def truncation(self) -> Truncation:
        return Truncation.parse(str(self.get("floodmark.truncation")))

    def validate(self) -> None:
        """Refuse configurations the broker must not run with: a value of the wrong type for a
        known setting (e.g. ``min.insync.replicas=abc``, which would otherwise reach every
        topic's metadata), an unsafe protocol mode."""
        for name, setting in SETTINGS.items():
            value = self.settings.get(name, setting.default)
            if value is not None and not setting.holds(value):
                raise ValueError(f"{name}={value!r}: expected "
                                 f"{'true or false' if setting.type is ConfigType.BOOLEAN else 'a number'}")
        mode = self.truncation
        if mode is not DEFAULT_TRUNCATION and not self.get("floodmark.truncation.allow.unsafe"):
            raise ValueError(
                f"floodmark.truncation={mode.value} is unsafe (it loses acknowledged data or lets "
                "replicas diverge, see docs/replication.md); set "
                "floodmark.truncation.allow.unsafe=true to run it anyway"
            )

    @property
    def unsafe_ack_duplicates_before_commit(self) -> bool:
        return bool(self.get("floodmark.unsafe.ack.duplicates.before.commit"))

    def topic_defaults(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, broker_name in TOPIC_CONFIG_DEFAULTS.items():
            out[name] = self.get(broker_name)
        if out.get("flush.ms") is None:
            out["flush.ms"] = LONG_MAX  # Kafka's topic default: never flush on time alone
        return out

    @classmethod
    def load(
        cls,
        *,
        data_dir: str | Path,
        listen: str = "127.0.0.1:9092",
        advertised: str | None = None,
        config_file: str | Path | None = None,
        overrides: Iterable[str] = (),
        node_id: int | None = None,
    ) -> BrokerConfig:
        settings: dict[str, Any] = dict(DEFAULTS)
        given: set[str] = set()
        if config_file is not None:
            with open(config_file, "rb") as fh:
                from_file = _flatten(tomllib.load(fh))
            settings.update(from_file)
            given.update(from_file)
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set expects name=value, got {item!r}")
            settings[name.strip()] = parse_value(value)
            given.add(name.strip())
        if node_id is not None:
            settings["node.id"] = node_id
            given.add("node.id")
        host, port = parse_host_port(listen)
        adv_host, adv_port = parse_host_port(advertised) if advertised else (None, None)
        config = cls(Path(data_dir), host, port, adv_host, adv_port, settings,
                     frozenset(given))
        config.validate()
        return config


SETTINGS: dict[str, Setting] = {name: _setting(name, default) for name, default in DEFAULTS.items()}
assert set(SETTINGS) >= DYNAMIC, "every dynamic setting is a setting"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML may write Kafka names quoted (``"log.segment.bytes" = 1``) or as tables."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out
