"""Broker settings: Kafka's names, from defaults < TOML file < ``--set name=value`` flags."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    "transactional.id.expiration.ms": 604_800_000,
    # floodmark's protocol mode (SPEC §2). Anything but leader-epoch is known to lose or diverge
    # data and needs floodmark.truncation.allow.unsafe=true to start.
    "floodmark.truncation": "leader-epoch",
    "floodmark.truncation.allow.unsafe": False,
    # UNSAFE, off: answer an idempotent producer's retry of a batch already in the log at once,
    # before the high watermark covers it (the bug of issue 8: acknowledged writes lost when the
    # leader is cut off). Only for proving that the fault tests catch it.
    "floodmark.unsafe.ack.duplicates.before.commit": False,
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


def parse_host_port(text: str, default_port: int = 9092) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT``, ``HOST`` (the default port), or a port alone: ``:9092`` and
    ``9092`` both mean port 9092 on 127.0.0.1 (``0.0.0.0:9092`` for every interface). Anything
    else is a one-line ValueError."""
    text = text.strip()
    if text.isdigit():
        host, port = "", text
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            return text, default_port
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"address {text!r} is not HOST:PORT (port 0 to 65535)")
    return host.strip("[]") or "127.0.0.1", int(port)


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    settings: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULTS))

    @property
    def node_id(self) -> int:
        return int(self.settings["node.id"])

    def get(self, name: str) -> Any:
        return self.settings.get(name, DEFAULTS.get(name))

    @property
    def truncation(self) -> Truncation:
        return Truncation.parse(str(self.get("floodmark.truncation")))

    def validate(self) -> None:
        """Refuse configurations the broker must not run with: a value of the wrong type for a
        known setting (e.g. ``min.insync.replicas=abc``, which would otherwise reach every
        topic's metadata), an unsafe protocol mode."""
        for name, default in DEFAULTS.items():
            value = self.settings.get(name, default)
            if value is None or default is None:
                continue
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif isinstance(default, float):
                ok = isinstance(value, int | float) and not isinstance(value, bool)
            else:
                ok = True
            if not ok:
                raise ValueError(f"{name}={value!r}: expected "
                                 f"{'true or false' if isinstance(default, bool) else 'a number'}")
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
        if config_file is not None:
            with open(config_file, "rb") as fh:
                settings.update(_flatten(tomllib.load(fh)))
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set expects name=value, got {item!r}")
            settings[name.strip()] = parse_value(value)
        if node_id is not None:
            settings["node.id"] = node_id
        host, port = parse_host_port(listen)
        adv_host, adv_port = parse_host_port(advertised) if advertised else (None, None)
        config = cls(Path(data_dir), host, port, adv_host, adv_port, settings)
        config.validate()
        return config


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
