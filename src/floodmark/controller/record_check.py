"""The one check every metadata record passes: before the controller appends it, and before a
broker (or a controller replaying its log) applies it.

``check_record`` knows each record type of ``image.py``: its fields and their types, the
metadata module's rules for names (``floodmark.metadata``) and the setting registry's for
configs (``floodmark.settings``: a topic's set as CreateTopics/AlterConfigs check it, a broker
resource's as dynamic broker configs check it), and what makes a partition registration
coherent (the ISR, the ELR and the leader are replicas; epochs are not negative). A record that
passes applies: ``MetadataImage.apply`` cannot fail on it, and every broker can take its
configs into use.

``KafkaError`` says why not, with the code an admin request gets for the same mistake
(INVALID_CONFIG, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from floodmark.constants import NO_LEADER
from floodmark.controller import delegation_tokens, scram
from floodmark.errors import ErrorCode, KafkaError
from floodmark.features import FeatureError, check_level
from floodmark.group_configs import validate as validate_group_configs
from floodmark.metadata import validate_topic_name
from floodmark.replication import LeaderRecoveryState
from floodmark.security import (
    QUOTA_KEYS,
    AclError,
    Endpoint,
    QuotaError,
    new_binding,
    new_entity,
    validate_quota,
)
from floodmark.settings import validate_dynamic, validate_topic_configs

MetadataRecord = dict[str, Any]


def _bad(rec: MetadataRecord, why: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, f"{rec.get('type')!r} record: {why}")


def _int(rec: MetadataRecord, name: str, *, minimum: int | None = 0) -> int:
    value = rec.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(rec, f"{name} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise _bad(rec, f"{name} must be at least {minimum}, not {value}")
    return value


def _str(rec: MetadataRecord, name: str, *, empty: bool = False) -> str:
    value = rec.get(name)
    if not isinstance(value, str) or (not empty and not value):
        raise _bad(rec, f"{name} must be a non-empty string, not {value!r}")
    return value


def _ids(rec: MetadataRecord, name: str, *, required: bool = True) -> tuple[int, ...]:
    value = rec.get(name)
    if value is None and not required:
        return ()
    if not isinstance(value, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in value):
        raise _bad(rec, f"{name} must be a list of broker ids, not {value!r}")
    if len(set(value)) != len(value):
        raise _bad(rec, f"{name} {value} names a broker twice")
    return tuple(value)


def _topic(rec: MetadataRecord, name: str) -> str:
    topic = _str(rec, name)
    validate_topic_name(topic)
    return topic


def _configs(rec: MetadataRecord) -> dict[str, Any]:
    configs = rec.get("configs")
    if not isinstance(configs, dict) or not all(isinstance(k, str) for k in configs):
        raise _bad(rec, f"configs must be an object, not {configs!r}")
    return configs


def _broker(rec: MetadataRecord) -> None:
    _int(rec, "broker_id")
    _int(rec, "broker_epoch")


def _register_broker(rec: MetadataRecord) -> None:
    _broker(rec)
    _str(rec, "host")
    port = _int(rec, "port")
    if port > 65535:
        raise _bad(rec, f"port {port} is not a TCP port")
    _str(rec, "incarnation")
    rack = rec.get("rack")
    if rack is not None and (not isinstance(rack, str) or not rack):
        raise _bad(rec, f"rack must be a non-empty string or null, not {rack!r}")
    listeners = rec.get("listeners")
    if listeners is not None:
        if not isinstance(listeners, list):
            raise _bad(rec, f"listeners must be a list, not {listeners!r}")
        for entry in listeners:
            try:
                Endpoint.from_record(entry)
            except ValueError as exc:
                raise _bad(rec, str(exc)) from None


def _topic_record(rec: MetadataRecord) -> None:
    _topic(rec, "name")
    try:
        uuid.UUID(_str(rec, "topic_id"))
    except ValueError:
        raise _bad(rec, f"topic_id {rec['topic_id']!r} is not a UUID") from None
    _topic_configs(rec)


def _topic_configs(rec: MetadataRecord) -> None:
    _topic(rec, "name")
    configs = _configs(rec)
    unset = sorted(name for name, value in configs.items() if value is None)
    if unset:  # a topic's set holds the values it has; a setting without one is absent
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"topic config(s) {unset} have no value")
    validate_topic_configs(configs)


def _partition(rec: MetadataRecord) -> None:
    _topic(rec, "topic")
    _int(rec, "partition")
    replicas = _ids(rec, "replicas")
    if not replicas:
        raise _bad(rec, "a partition has at least one replica")
    for name in ("isr", "elr", "last_known_elr"):
        outside = [b for b in _ids(rec, name, required=name == "isr") if b not in replicas]
        if outside:
            raise _bad(rec, f"{name} members {outside} are not replicas {list(replicas)}")
    leader = _int(rec, "leader", minimum=NO_LEADER)
    if leader != NO_LEADER and leader not in replicas:
        raise _bad(rec, f"leader {leader} is not a replica {list(replicas)}")
    _int(rec, "leader_epoch")
    _int(rec, "partition_epoch")
    state = rec.get("leader_recovery_state", 0)
    if state not in {s.value for s in LeaderRecoveryState} or isinstance(state, bool):
        raise _bad(rec, f"leader_recovery_state {state!r} is unknown")
    directories = rec.get("directories")
    if directories is not None and (
            not isinstance(directories, list) or len(directories) != len(replicas)
            or not all(isinstance(d, str) and d for d in directories)):
        raise _bad(rec, f"directories must be one directory id per replica, not "
                        f"{directories!r}")


def _reassignment(rec: MetadataRecord) -> None:
    _topic(rec, "topic")
    _int(rec, "partition")
    if rec.get("target") is not None:
        if not _ids(rec, "target"):
            raise _bad(rec, "a reassignment's target has at least one replica")
        _ids(rec, "original", required=False)
    _ids(rec, "adding")
    _ids(rec, "removing")


def _broker_configs(rec: MetadataRecord) -> None:
    resource = _str(rec, "resource", empty=True)
    if resource and not resource.isdigit():
        raise _bad(rec, f"resource must be a broker id or empty, not {resource!r}")
    try:
        validate_dynamic(_configs(rec), resource)
    except (ValueError, TypeError) as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc


def _group_configs(rec: MetadataRecord) -> None:
    """A group's set: Kafka's names, types and rules (the bounds are the writing broker's)."""
    _str(rec, "name")
    validate_group_configs(_configs(rec))


def _cluster_id(rec: MetadataRecord) -> None:
    _str(rec, "cluster_id")


def _feature_level(rec: MetadataRecord) -> None:
    try:
        check_level(_str(rec, "name"), _int(rec, "level"))
        if "epoch" in rec:
            _int(rec, "epoch")
    except FeatureError as exc:
        raise _bad(rec, str(exc)) from None


def _remove_topic(rec: MetadataRecord) -> None:
    _topic(rec, "name")


def _producer_ids(rec: MetadataRecord) -> None:
    _int(rec, "next")


def _scram(read: Callable[[MetadataRecord], object]) -> Callable[[MetadataRecord], None]:
    def check(rec: MetadataRecord) -> None:
        try:
            read(rec)
        except ValueError as exc:
            raise _bad(rec, str(exc)) from None
    return check


def _leader_change(rec: MetadataRecord) -> None:
    _int(rec, "epoch")
    _int(rec, "leader")


def _voters(rec: MetadataRecord) -> None:
    _int(rec, "epoch")
    _int(rec, "voter")
    _str(rec, "directory_id")


def _voter_set(rec: MetadataRecord) -> None:
    _int(rec, "epoch")
    voters = rec.get("voters")
    if not isinstance(voters, list) or not voters or not all(
            isinstance(v, list) and len(v) == 2 and isinstance(v[0], int)
            and isinstance(v[1], str) for v in voters):
        raise _bad(rec, "voters is not a non-empty list of [id, directory id]")
    endpoints = rec.get("endpoints", [])
    if not isinstance(endpoints, list) or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], int)
            and isinstance(e[1], str) for e in endpoints):
        raise _bad(rec, "endpoints is not a list of [id, host:port]")


def _acl_id(rec: MetadataRecord) -> None:
    try:
        uuid.UUID(_str(rec, "id"))
    except ValueError:
        raise _bad(rec, f"id {rec['id']!r} is not a UUID") from None


def _acl(rec: MetadataRecord) -> None:
    _acl_id(rec)
    for name in ("resource_type", "pattern_type", "operation", "permission_type"):
        _int(rec, name)
    try:
        new_binding(rec["resource_type"], _str(rec, "resource_name"), rec["pattern_type"],
                    _str(rec, "principal"), _str(rec, "host"), rec["operation"],
                    rec["permission_type"])
    except AclError as exc:
        raise _bad(rec, str(exc)) from None


def _client_quota(rec: MetadataRecord) -> None:
    pairs = rec.get("entity")
    if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
            and (p[1] is None or isinstance(p[1], str)) for p in pairs):
        raise _bad(rec, "entity is not a list of [type, name or null] pairs")
    key = _str(rec, "key")
    try:
        new_entity((t, n) for t, n in pairs)
        if rec.get("remove") is True:
            if key not in QUOTA_KEYS:
                raise QuotaError(f"Invalid configuration key {key}")
        else:
            value = rec.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise QuotaError(f"value {value!r} of {key} is not a number")
            validate_quota(key, float(value))
    except QuotaError as exc:
        raise _bad(rec, str(exc)) from None


_CHECKS: dict[str, Callable[[MetadataRecord], None]] = {
    "cluster_id": _cluster_id,
    "feature_level": _feature_level,
    "register_broker": _register_broker,
    "fence_broker": _broker,
    "unfence_broker": _broker,
    "broker_shutdown": _broker,
    "unregister_broker": _broker,
    "topic": _topic_record,
    "partition": _partition,
    "topic_configs": _topic_configs,
    "remove_topic": _remove_topic,
    "reassignment": _reassignment,
    "broker_configs": _broker_configs,
    "group_configs": _group_configs,
    "producer_ids": _producer_ids,
    scram.CREDENTIAL: _scram(scram.record_credential),
    scram.REMOVE: _scram(scram.record_removal),
    delegation_tokens.TOKEN: _scram(delegation_tokens.record_token),
    delegation_tokens.REMOVE: _scram(delegation_tokens.record_token_id),
    "leader_change": _leader_change,
    "voters": _voters,
    "voter_set": _voter_set,
    "acl": _acl,
    "remove_acl": _acl_id,
    "client_quota": _client_quota,
}

RECORD_TYPES = frozenset(_CHECKS)


def check_record(rec: Any) -> None:
    """KafkaError unless ``rec`` is a metadata record every broker can apply."""
    if not isinstance(rec, dict):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"a metadata record is an object, not "
                                                    f"{type(rec).__name__}")
    check = _CHECKS.get(rec.get("type"))  # type: ignore[arg-type]
    if check is None:
        raise _bad(rec, "unknown metadata record type")
    check(rec)
