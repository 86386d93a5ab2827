"""Group configs (ConfigResource type GROUP = 32; Kafka's ``GroupConfig``, KIP-848, KIP-932,
KIP-1071): which names a group may set, their types, the broker setting each one defaults from,
the broker's min/max settings that bound it, and the one check of a group's config set.

A group config is controller metadata (a ``group_configs`` record per group, as Kafka keeps a
ConfigRecord of resource type GROUP): the broker checks a change here, the controller writes it,
every broker reads it from its metadata image. A group's value wins over the broker setting it
defaults from (``effective``); a value set while the group runs applies to it from its next
heartbeat / fetch, as in Kafka.

The check is Kafka's ``GroupConfig.validate``, in its order: an unknown name
(``Unknown group config name: X``), then each value's type and ConfigDef rule
(``config_rules.RULES``: ``Invalid value X for configuration Y: ...``), then the broker's bounds
(``X must be greater than or equal to group.share.min...``), then a session timeout above its
heartbeat interval. Kafka checks the bounds on the broker defaults merged in too, which is the
same for any broker Kafka would start; floodmark's brokers may run defaults outside the bounds
(300 ms heartbeats in tests), so only the group's own values are bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from floodmark.errors import ErrorCode, KafkaError
from floodmark.settings import ConfigType, Setting, check_value

GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    type: ConfigType
    default: Any  # used when ``broker`` is None (or the broker does not know the setting)
    broker: str | None = None  # the broker setting it defaults from
    min_setting: str | None = None  # the broker's bounds for a group's own value
    max_setting: str | None = None


def _int(broker: str, low: str | None, high: str | None, default: int) -> GroupConfigDef:
    return GroupConfigDef(ConfigType.INT, default, broker, low, high)


# Kafka 4.2's GroupConfig, in its order.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": _int(
        "group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms", 45_000),
    "consumer.heartbeat.interval.ms": _int(
        "group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms", 5_000),
    "share.session.timeout.ms": _int(
        "group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms", 45_000),
    "share.heartbeat.interval.ms": _int(
        "group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms", 5_000),
    "share.record.lock.duration.ms": _int(
        "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms", 30_000),
    "share.delivery.count.limit": _int(
        "group.share.delivery.count.limit", "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit", 5),
    "share.partition.max.record.locks": _int(
        "group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks", 2_000),
    # floodmark: broker settings too (Kafka has them as group configs only, same defaults)
    "share.auto.offset.reset": GroupConfigDef(ConfigType.STRING, "latest",
                                              "share.auto.offset.reset"),
    "share.isolation.level": GroupConfigDef(ConfigType.STRING, "read_uncommitted",
                                            "share.isolation.level"),
    "share.renew.acknowledge.enable": GroupConfigDef(ConfigType.BOOLEAN, True),
    "streams.session.timeout.ms": _int(
        "group.streams.session.timeout.ms", "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms", 45_000),
    "streams.heartbeat.interval.ms": _int(
        "group.streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms", 5_000),
    "streams.num.standby.replicas": _int(
        "group.streams.num.standby.replicas", None, "group.streams.max.standby.replicas", 0),
    "streams.initial.rebalance.delay.ms": _int(
        "group.streams.initial.rebalance.delay.ms", None, None, 3_000),
}

# session timeout > heartbeat interval, per protocol (Kafka checks them after the bounds)
_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)

BrokerSetting = Callable[[str], Any]  # a broker setting's value in force, by name


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def typed(name: str, value: Any) -> Any:
    """One group config value (text or typed) -> its type, checked against its ConfigDef rule;
    KafkaError INVALID_CONFIG in Kafka's words otherwise."""
    spec = GROUP_CONFIGS.get(name)
    if spec is None:
        raise _invalid(f"Unknown group config name: {name}")
    if value is None:
        raise _invalid(f"Null value not supported for group configs: {name}")
    try:
        return check_value(name, value, Setting(name, spec.default, spec.type, True))
    except ValueError as exc:
        raise _invalid(str(exc)) from None


def default_of(name: str, broker: BrokerSetting) -> Any:
    """A group config's value for a group without its own: the broker setting's, typed."""
    spec = GROUP_CONFIGS[name]
    if spec.broker is None:
        return spec.default
    value = broker(spec.broker)
    return spec.default if value is None else typed(name, value)


def validate(configs: Mapping[str, Any], broker: BrokerSetting | None = None
             ) -> dict[str, Any]:
    """A group's whole config set, checked as Kafka's ``GroupConfig.validate`` checks it (see
    the module's text); returns it typed. ``broker``: the broker settings in force (their
    bounds and defaults); without it (reading a metadata record) only names, types and rules
    are checked."""
    unknown = [n for n in configs if n not in GROUP_CONFIGS]
    if unknown:
        raise _invalid(f"Unknown group config name: {unknown[0]}")
    out = {name: typed(name, value) for name, value in configs.items()}
    if broker is None:
        return out
    for name, value in out.items():
        spec = GROUP_CONFIGS[name]
        low = broker(spec.min_setting) if spec.min_setting is not None else None
        high = broker(spec.max_setting) if spec.max_setting is not None else None
        if low is not None and value < int(low):
            raise _invalid(f"{name} must be greater than or equal to {spec.min_setting}")
        if high is not None and value > int(high):
            raise _invalid(f"{name} must be less than or equal to {spec.max_setting}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if session not in out and heartbeat not in out:
            continue
        s = out.get(session, default_of(session, broker))
        h = out.get(heartbeat, default_of(heartbeat, broker))
        if s <= h:
            raise _invalid(f"{session} must be greater than {heartbeat}")
    return out


def effective(own: Mapping[str, Any], broker: BrokerSetting) -> dict[str, Any]:
    """Every group config of a group as it runs: its own value, else the broker's."""
    return {name: own[name] if name in own else default_of(name, broker)
            for name in GROUP_CONFIGS}


def split(configs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A group's set read back from a record older than a rule: the values the registry takes,
    and why each other one is refused."""
    kept: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name, value in configs.items():
        try:
            kept[name] = typed(name, value)
        except KafkaError as exc:
            refused[name] = exc.message
    return kept, refused
