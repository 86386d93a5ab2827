"""``floodmark config describe|alter``: kafka-configs.sh's job in its vocabulary.

The entity: ``--entity-type topics|brokers|groups|users|clients`` with ``--entity-name NAME`` or
``--entity-default`` (brokers: the cluster-wide default; users/clients: the default quota), in
the order given; ``--entity-type users --entity-name U --entity-type clients --entity-name C``
names a (user, client id) pair, as kafka-configs.sh does.

Groups (KIP-848 / KIP-932 group configs, ConfigResource GROUP: ``share.auto.offset.reset``,
``consumer.session.timeout.ms``...) are asked one by name, as topics are.

Topics, brokers and groups go through DescribeConfigs v4 (with synonyms: every layer that holds a value,
most specific first) and IncrementalAlterConfigs (SET for ``--add-config k=v,k2=[a,b]``, DELETE
for ``--delete-config k``). ``describe`` shows the dynamic configs of the entity (a topic's own,
a broker's own, the cluster default's), ``--all`` every config with its source. A broker is
asked about itself (DescribeConfigs for broker N goes to broker N, as Kafka's admin client
does). Users and clients are client quotas: ``floodmark quota``'s calls (``cli/quota.py``).
A refusal prints the broker's code and message in one line, exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from floodmark.cli import quota
from floodmark.cli.common import (
    CliError,
    add_bootstrap,
    check_configs,
    connect,
    kafka_config_list,
    pairs,
)
from floodmark.client import ClusterClient, error_text
from floodmark.security import CLIENT_ID, USER

API_DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION = 32, 4
API_INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_VERSION = 44, 1
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
OP_SET, OP_DELETE = 0, 1
ENTITY_TYPES = ("topics", "brokers", "groups", "users", "clients")
_RESOURCE_OF = {"topics": RESOURCE_TOPIC, "groups": RESOURCE_GROUP}
_QUOTA_TYPES = {"users": USER, "clients": CLIENT_ID}
# What ``describe`` without ``--all`` shows (kafka-configs.sh's filter): the entity's own layer,
# by its ConfigSource name (floodmark.settings.ConfigSource: the CLI does not import the broker's
# settings, which load the storage layer, at every command's start).
_DYNAMIC = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG",
            "groups": "DYNAMIC_GROUP_CONFIG",
            "broker-default": "DYNAMIC_DEFAULT_BROKER_CONFIG"}
_SCRAM_PREFIX = "SCRAM-SHA-"


@dataclass(frozen=True)
class ConfigEntry:
    """One config as DescribeConfigs answers it (``value`` None: sensitive or unset)."""

    name: str
    value: str | None
    source: str
    sensitive: bool
    read_only: bool
    synonyms: tuple[tuple[str, str, str | None], ...]  # (source, name, value)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source,
                "sensitive": self.sensitive, "read_only": self.read_only,
                "synonyms": [{"source": s, "name": n, "value": v} for s, n, v in self.synonyms]}

    def kafka_line(self) -> str:
        """kafka-configs.sh's ``name=value sensitive=false synonyms={SOURCE:name=value, ...}``."""
        synonyms = ", ".join(f"{s}:{n}={v}" for s, n, v in self.synonyms)
        return (f"{self.name}={self.value} sensitive={str(self.sensitive).lower()} "
                f"synonyms={{{synonyms}}}")


def source_name(code: int) -> str:
    from floodmark.settings import ConfigSource

    try:
        return ConfigSource(code).name
    except ValueError:
        return f"source {code}"


def describe_configs(cluster: ClusterClient, resource_type: int, name: str,
                     node_id: int | None = None) -> list[ConfigEntry]:
    """Every config of one resource with its source and synonyms (DescribeConfigs v4), asked
    of ``node_id`` (a broker about itself) or any broker. A refusal: CliError with the
    broker's code and message."""
    body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                           "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False}
    resp = (cluster.request_any(API_DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, body)
            if node_id is None
            else cluster.request_node(node_id, API_DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION,
                                      body))
    (res,) = resp.results
    if int(res.error_code):
        raise CliError(f"{_resource_text(resource_type, name)}: "
                       f"{error_text(int(res.error_code), res.error_message)}")
    return [ConfigEntry(name=str(c.name), value=c.value, source=source_name(int(c.config_source)),
                        sensitive=bool(c.is_sensitive), read_only=bool(c.read_only),
                        synonyms=tuple((source_name(int(s.source)), str(s.name), s.value)
                                       for s in c.synonyms))
            for c in res.configs]


def _resource_text(resource_type: int, name: str) -> str:
    if resource_type == RESOURCE_BROKER:
        return "default config for brokers" if name == "" else f"broker {name}"
    return f"group {name}" if resource_type == RESOURCE_GROUP else f"topic {name}"


def register(subparsers: Any) -> None:
    config = subparsers.add_parser("config", help="describe or alter configs of topics, brokers, "
                                                  "users and clients (kafka-configs.sh)")
    csub = config.add_subparsers(dest="config_command", metavar="ACTION")
    for name, func, help_text in (
            ("describe", config_describe, "the dynamic configs of an entity (--all: every "
                                          "config with its source and synonyms)"),
            ("alter", config_alter, "--add-config and/or --delete-config on one entity")):
        p = csub.add_parser(name, help=help_text)
        p.add_argument("--entity-type", action="append", required=True, choices=ENTITY_TYPES,
                       dest="entity_types",
                       help="repeat with users then clients for a (user, client id) pair")
        p.add_argument("--entity-name", action="append", dest="entity_names", metavar="NAME",
                       help="a topic, a broker id, a user principal's name, a client id "
                            "(describe without one: every entity of the type)")
        p.add_argument("--entity-default", action="append_const", const=None,
                       dest="entity_names",
                       help="brokers: the cluster-wide default; users/clients: the default "
                            "quota")
        if name == "describe":
            p.add_argument("--all", action="store_true",
                           help="every config (topics, brokers), not only the dynamic ones")
            p.add_argument("--json", action="store_true",
                           help='[{"entity_type", "entity_name", "configs": [{"name", "value", '
                                '"source", "sensitive", "read_only", "synonyms"}]}]')
        else:
            p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]",
                           help="set: comma-separated, a list value in brackets "
                                "(cleanup.policy=[compact,delete])")
            p.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                           help="remove the entity's own value (back to the next layer)")
        add_bootstrap(p)
        p.set_defaults(func=func)
    config.set_defaults(func=lambda a: (config.print_help(), 2)[1])


def _entities(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(type, name) pairs in the order given; name None: the default; "" never. A type without
    a name (describe only): ``...`` stands for every entity of the type."""
    types: list[str] = args.entity_types
    names: list[str | None] = list(args.entity_names or [])
    if len(names) > len(types):
        raise CliError("more --entity-name/--entity-default than --entity-type")
    if len(types) > 1 and sorted(types) != ["clients", "users"]:
        raise CliError("several --entity-type only as users and clients (a (user, client id) "
                       "pair)")
    if len(types) == 2 and len(names) < 2 and args.func is config_alter:
        raise CliError("a (user, client id) pair needs a name or --entity-default for each")
    out: list[tuple[str, str | None]] = []
    for i, t in enumerate(types):
        name = names[i] if i < len(names) else "..."
        if t in ("topics", "groups") and name is None:
            raise CliError(f"--entity-default is not supported for {t}")
        if t == "groups" and name == "...":
            raise CliError("--entity-type groups needs --entity-name GROUP")
        if t == "brokers" and name not in (None, "..."):
            try:
                int(str(name))
            except ValueError:
                raise CliError(f"--entity-name {name!r}: a broker id is a number") from None
        out.append((t, name))
    return out


# -- describe ---------------------------------------------------------------------------------
def config_describe(args: argparse.Namespace) -> int:
    entities = _entities(args)
    if entities[0][0] in _QUOTA_TYPES:
        return _describe_quotas(args, entities)
    ((entity_type, name),) = entities
    results: list[dict[str, Any]] = []
    with connect(args) as cluster:
        meta = cluster.metadata(None)
        if entity_type == "topics":
            names = ([str(name)] if name != "..." else
                     sorted(str(t.name) for t in meta.topics if int(t.error_code) == 0))
            targets: list[tuple[str, str, int | None]] = [("topics", n, None) for n in names]
        elif entity_type == "groups":
            targets = [("groups", str(name), None)]
        elif name == "...":  # every live broker, then the cluster default (as kafka-configs.sh)
            targets = [("brokers", str(int(b.node_id)), int(b.node_id))
                       for b in sorted(meta.brokers, key=lambda b: int(b.node_id))]
            targets.append(("broker-default", "", None))
        elif name is None:
            targets = [("broker-default", "", None)]
        else:
            if int(name) not in cluster.brokers:
                raise CliError(f"broker {name} is not a live broker of this cluster")
            targets = [("brokers", str(name), int(name))]
        for kind, resource, node in targets:
            resource_type = _RESOURCE_OF.get(kind, RESOURCE_BROKER)
            entries = describe_configs(cluster, resource_type, resource, node)
            if not args.all:
                entries = [e for e in entries if e.source == _DYNAMIC[kind]]
            results.append({"kind": kind, "name": resource, "configs": entries})
    if args.json:
        print(json.dumps([{"entity_type": "brokers" if r["kind"] == "broker-default"
                           else r["kind"],
                           "entity_name": None if r["kind"] == "broker-default" else r["name"],
                           "configs": [e.as_json() for e in r["configs"]]} for r in results],
                         indent=2))
        return 0
    for r in results:
        if r["kind"] == "broker-default":
            print("Default configs for brokers in the cluster are:")
        else:
            print(f"{'All' if args.all else 'Dynamic'} configs for {r['kind'][:-1]} "
                  f"{r['name']} are:")
        for e in r["configs"]:
            print(f"  {e.kafka_line()}")
    return 0


def _quota_entity_text(entity: list[tuple[str, str | None]]) -> str:
    """kafka-configs.sh's ``user-principal 'alice', client-id 'app'`` /
    ``the default user-principal``."""
    words = {USER: "user-principal", CLIENT_ID: "client-id"}
    ordered = sorted(entity, key=lambda tn: tn[0] != USER)  # the user first, as Kafka says it
    return ", ".join(f"the default {words.get(t, t)}" if n is None
                     else f"{words.get(t, t)} '{n}'" for t, n in ordered)


def _describe_quotas(args: argparse.Namespace, entities: list[tuple[str, str | None]]) -> int:
    if args.all:
        raise CliError("--all is for topics and brokers (client quotas have no defaults to "
                       "list)")
    named = [(_QUOTA_TYPES[t], n) for t, n in entities if n != "..."]
    every = tuple(_QUOTA_TYPES[t] for t, n in entities if n == "...")
    found = quota.describe_quotas(args, named, strict=True, any_of=every)
    if args.json:
        print(json.dumps([{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                           "quotas": values} for entity, values in found], indent=2))
        return 0
    for entity, values in found:
        text = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for {_quota_entity_text(entity)} are {text}")
    return 0


# -- alter --------------------------------------------------------------------------------------
def config_alter(args: argparse.Namespace) -> int:
    entities = _entities(args)
    to_set = pairs(kafka_config_list(args.add_config), "--add-config")
    to_delete = kafka_config_list(args.delete_config)
    if not to_set and not to_delete:
        raise CliError("nothing to alter: give --add-config K=V and/or --delete-config K")
    if both := sorted(set(to_set) & set(to_delete)):
        raise CliError(f"{', '.join(both)}: both in --add-config and --delete-config")
    if any(n == "..." for _t, n in entities):
        raise CliError("alter needs --entity-name NAME or --entity-default")
    if entities[0][0] in _QUOTA_TYPES:
        return _alter_quotas(args, entities, to_set, to_delete)
    ((entity_type, name),) = entities
    resource_type = _RESOURCE_OF.get(entity_type, RESOURCE_BROKER)
    if resource_type == RESOURCE_GROUP:
        _check_group_configs(to_set)
    else:
        check_configs(to_set, topic=resource_type == RESOURCE_TOPIC)
    resource = "" if name is None else str(name)
    ops = [{"name": k, "config_operation": OP_SET, "value": v} for k, v in to_set.items()]
    ops += [{"name": k, "config_operation": OP_DELETE, "value": None} for k in to_delete]
    with connect(args) as cluster:
        resp = cluster.request_any(API_INCREMENTAL_ALTER_CONFIGS,
                                   INCREMENTAL_ALTER_CONFIGS_VERSION, {
            "resources": [{"resource_type": resource_type, "resource_name": resource,
                           "configs": ops}], "validate_only": False})
    (r,) = resp.responses
    if int(r.error_code):
        print(f"error: {_resource_text(resource_type, resource)}: "
              f"{error_text(int(r.error_code), r.error_message)}", file=sys.stderr)
        return 1
    if name is None:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {entity_type[:-1]} {resource}.")
    return 0


def _check_group_configs(configs: dict[str, str]) -> None:
    """A group's values checked before they are sent (Kafka's names, types and rules; the
    broker checks its bounds)."""
    from floodmark.errors import KafkaError
    from floodmark.group_configs import validate  # when asked of (it loads the settings)

    try:
        validate(configs)
    except KafkaError as exc:
        raise CliError(exc.message) from None


def _alter_quotas(args: argparse.Namespace, entities: list[tuple[str, str | None]],
                  to_set: dict[str, str], to_delete: list[str]) -> int:
    if any(k.upper().startswith(_SCRAM_PREFIX) for k in [*to_set, *to_delete]):
        raise CliError("SCRAM credentials: `floodmark user scram set|delete` (the password is "
                       "salted there, never sent)")
    ops: list[dict[str, Any]] = []
    for k, v in to_set.items():
        try:
            ops.append({"key": k, "value": float(v), "remove": False})
        except ValueError:
            raise CliError(f"--add-config {k}={v}: a quota is a number") from None
    ops += [{"key": k, "value": 0.0, "remove": True} for k in to_delete]
    entity = [(_QUOTA_TYPES[t], n) for t, n in entities]
    rc = quota.alter_quotas(args, entity, ops)
    if rc == 0:
        print(f"Completed updating config for {_quota_entity_text(entity)}.")
    return rc
