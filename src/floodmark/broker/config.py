"""Broker settings: Kafka's names, from defaults < TOML file < ``--set name=value`` flags <
dynamic broker configs (KIP-226: the cluster-wide default, then this broker's own).

The typed registry (``DEFAULTS``, ``SETTINGS``, ``DYNAMIC``, ``validate_dynamic``, ...) lives in
``floodmark.settings``, below the broker and the controller, which both check configs with it;
it is re-exported here. The ``--set`` parser and the start-time check
(``BrokerConfig.validate``) read it.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from floodmark.address import parse_host_port
from floodmark.controller import broker_rack
from floodmark.replication import DEFAULT_TRUNCATION, Truncation
from floodmark.security import (
    ClientSecurity,
    ListenerConfig,
    ServerTls,
    authorizer_settings,
    listener_config,
    listener_sasl_settings,
    plain_users,
    ssl_settings,
)
from floodmark.settings import (
    DEFAULTS,
    DERIVED_TOPIC_DEFAULTS,
    DYNAMIC,
    LONG_MAX,
    SETTINGS,
    TOPIC_CONFIG_DEFAULTS,
    TOPIC_ONLY_CONFIGS,
    ConfigSource,
    ConfigType,
    Setting,
    check_value,
    parse_value,
    render,
    validate_dynamic,
)
from floodmark.storage import parse_log_dirs

__all__ = ["DEFAULTS", "DYNAMIC", "LONG_MAX", "SETTINGS", "TOPIC_CONFIG_DEFAULTS", "BrokerConfig",
           "ConfigSource", "ConfigType", "ConfigValue", "Configs", "DynamicLayer", "Setting",
           "as_int", "parse_value", "render", "validate_dynamic"]


ConfigValue = bool | int | float | str | None
"""A setting's typed value, as the registry (``SETTINGS``) types it: BOOLEAN a bool, INT and LONG
an int, DOUBLE a float, STRING and LIST (comma-separated, as Kafka writes them) a str, and None
where Kafka's default is null (``log.flush.interval.ms``)."""
Configs = dict[str, ConfigValue]
"""Settings by Kafka's names: a broker's layers, a topic's configs."""


def as_int(name: str, value: ConfigValue) -> int:
    """An INT or LONG value (a number given as text too); ValueError names the setting."""
    if value is None or isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: expected a number")
    return int(value)


@dataclass
class DynamicLayer:
    """The dynamic broker configs in force on this broker (typed): the cluster-wide default
    and this broker's own; the metadata records carry them, the broker replaces them."""

    cluster_default: Configs = field(default_factory=dict)
    this_broker: Configs = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    settings: Mapping[str, ConfigValue] = field(default_factory=lambda: dict(DEFAULTS))
    static_names: frozenset[str] = frozenset()
    """Settings given at start (TOML file, ``--set``): STATIC_BROKER_CONFIG."""
    dynamic: DynamicLayer = field(default_factory=DynamicLayer)

    @property
    def node_id(self) -> int:
        return as_int("node.id", self.settings["node.id"])

    def get(self, name: str) -> ConfigValue:
        """The value in force: this broker's dynamic value, the cluster-wide dynamic default,
        the static setting, Kafka's default."""
        for layer in (self.dynamic.this_broker, self.dynamic.cluster_default):
            if name in layer:
                return layer[name]
        return self.settings.get(name, DEFAULTS.get(name))

    def get_int(self, name: str) -> int:
        """An INT or LONG setting in force (``validate`` checked its type at start)."""
        return as_int(name, self.get(name))

    def min_insync_replicas(self, topic_configs: Mapping[str, ConfigValue]) -> int:
        """A topic's ``min.insync.replicas``: its own config, else the broker's in force."""
        name = "min.insync.replicas"
        return as_int(name, topic_configs[name] if name in topic_configs else self.get(name))

    def get_bool(self, name: str) -> bool:
        """A BOOLEAN setting in force."""
        value = self.get(name)
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"

    def sources(self, name: str) -> list[tuple[ConfigSource, ConfigValue]]:
        """Where ``name``'s value comes from, most specific first (DescribeConfigs' synonyms):
        every layer that has a value; the first one is in force."""
        out: list[tuple[ConfigSource, ConfigValue]] = []
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

    def log_settings(self) -> Configs:
        """Every log-level value in force (the base of every topic's LogConfig)."""
        out: Configs = {k: v for k, v in self.settings.items() if v is not None}
        for layer in (self.dynamic.cluster_default, self.dynamic.this_broker):
            for name, value in layer.items():
                if value is None:
                    out.pop(name, None)
                else:
                    out[name] = value
        return out

    @functools.cached_property
    def listeners(self) -> ListenerConfig:
        """This node's listeners (``security.listeners``): the one PLAINTEXT listener of
        ``--listen``/``--advertised`` unless ``listeners`` & co. are set."""
        roles = str(self.get("process.roles") or "broker")
        return listener_config(self.get, listen_host=self.listen_host,
                               listen_port=self.listen_port,
                               advertised_host=self.advertised_host,
                               advertised_port=self.advertised_port,
                               is_broker="broker" in roles)

    @functools.cached_property
    def listener_tls(self) -> dict[str, ServerTls]:
        """The TLS of each SSL / SASL_SSL listener, by name (its ``ssl.*`` settings, loaded)."""
        return {ep.name: ServerTls(ssl_settings(self.get, ep.name), ep.name)
                for ep in self.listeners.listeners if ep.security_protocol.uses_tls}

    @functools.cached_property
    def inter_broker_security(self) -> ClientSecurity:
        """How this broker dials other brokers (replica fetching, transaction markers): the
        protocol of ``inter.broker.listener.name``, with this node's key and trust stores."""
        name = self.listeners.inter_broker_listener_name
        ep = self.listeners.advertised_for(name)
        if ep is None:
            return ClientSecurity()
        return ClientSecurity.for_node(self.get, ep.security_protocol, name)

    @property
    def rack(self) -> str | None:
        """``broker.rack`` (KIP-36); None when unset or blank (a TOML number is its text)."""
        return broker_rack(render(self.get("broker.rack")))

    @property
    def log_dirs(self) -> list[Path]:
        """``log.dirs`` (several directories, JBOD), else ``--data-dir`` alone."""
        dirs = parse_log_dirs(render(self.get("log.dirs")) if self.get("log.dirs") else None)
        return [Path(d) for d in dirs] or [self.data_dir]

    @property
    def truncation(self) -> Truncation:
        return Truncation.parse(str(self.get("floodmark.truncation")))

    def validate(self) -> None:
        """Refuse configurations the broker must not run with: a value of the wrong type for a
        known setting (e.g. ``min.insync.replicas=abc``, which would otherwise reach every
        topic's metadata), a value outside Kafka's bounds or choices for it
        (``log.roll.hours=0``, ``log.cleanup.policy=keep``), an unsafe protocol mode."""
        for name, setting in SETTINGS.items():
            value = self.settings.get(name, setting.default)
            if value is not None and not setting.holds(value):
                raise ValueError(f"{name}={value!r}: expected "
                                 f"{'true or false' if setting.type is ConfigType.BOOLEAN else 'a number'}")
        for name in sorted(self.static_names & SETTINGS.keys()):  # Kafka's bounds and choices
            check_value(name, self.settings.get(name))
        authorizer_settings(str(self.get("authorizer.class.name") or ""),
                            str(self.get("super.users") or ""),
                            self.get_bool("allow.everyone.if.no.acl.found"))
        self.listener_tls  # noqa: B018  # a bad listener or TLS setting: one line at start
        for ep in self.listeners.listeners:  # a bad SASL setting: one line at start
            sasl = listener_sasl_settings(self.get, ep.name, ep.security_protocol.value)
            if sasl is not None and "PLAIN" in sasl.enabled_mechanisms:
                plain_users(self.get)  # the users file must be readable
        self.inter_broker_security.ssl_context()
        mode = self.truncation
        if mode is not DEFAULT_TRUNCATION and not self.get_bool("floodmark.truncation.allow.unsafe"):
            raise ValueError(
                f"floodmark.truncation={mode.value} is unsafe (it loses acknowledged data or lets "
                "replicas diverge, see docs/replication.md); set "
                "floodmark.truncation.allow.unsafe=true to run it anyway"
            )

    @property
    def unsafe_ack_duplicates_before_commit(self) -> bool:
        return self.get_bool("floodmark.unsafe.ack.duplicates.before.commit")

    def topic_defaults(self) -> Configs:
        """Every topic config's value for a topic without its own: the broker setting it
        defaults from, else (that setting null) the form it derives from (``segment.ms`` from
        ``log.roll.hours``), else Kafka's topic default; topic-only configs their default."""
        out: Configs = {}
        for name, broker_name in TOPIC_CONFIG_DEFAULTS.items():
            out[name] = self.get(broker_name)
            for source, factor in DERIVED_TOPIC_DEFAULTS.get(name, ()):
                if out[name] is None and self.get(source) is not None:
                    out[name] = self.get_int(source) * factor
        if out.get("flush.ms") is None:
            out["flush.ms"] = LONG_MAX  # Kafka's topic default: never flush on time alone
        for name, (_kind, default) in TOPIC_ONLY_CONFIGS.items():
            out[name] = default
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
        settings: Configs = dict(DEFAULTS)
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
            name = name.strip()
            # A STRING setting keeps its text (broker.rack=1.10 is the rack "1.10", not 1.1).
            setting = SETTINGS.get(name)
            string = setting is not None and setting.type is ConfigType.STRING
            settings[name] = value if string else parse_value(value)
            given.add(name)
        if node_id is not None:
            settings["node.id"] = node_id
            given.add("node.id")
        host, port = parse_host_port(listen)
        adv_host, adv_port = parse_host_port(advertised) if advertised else (None, None)
        config = cls(Path(data_dir), host, port, adv_host, adv_port, settings,
                     frozenset(given))
        config.validate()
        return config


def _flatten(table: Mapping[str, object], prefix: str = "") -> Configs:
    """TOML may write Kafka names quoted (``"log.segment.bytes" = 1``) or as tables; a list is
    Kafka's comma-separated LIST, any other TOML value (a date) its text."""
    out: Configs = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, bool | int | float | str):
            out[name] = value
        elif isinstance(value, list):
            out[name] = ",".join(str(v) for v in value)
        else:
            out[name] = str(value)
    return out
