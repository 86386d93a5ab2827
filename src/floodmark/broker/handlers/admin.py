"""ApiVersions, Metadata, CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs/IncrementalAlterConfigs (topics and brokers), and the other admin APIs."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floodmark import features
from floodmark.broker import dynamic_configs, group_config_admin
from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.config import (
    SETTINGS,
    TOPIC_CONFIG_DEFAULTS,
    Configs,
    ConfigSource,
    ConfigType,
    ConfigValue,
    render,
)
from floodmark.broker.setting_keys import AUTO_CREATE_TOPICS_ENABLE, NUM_PARTITIONS
from floodmark.errors import ErrorCode, KafkaError
from floodmark.features import FinalizedFeatures
from floodmark.metadata import TopicMeta, validate_topic_name
from floodmark.security import TokenBucket
from floodmark.settings import is_sensitive, topic_config_setting
from floodmark.wire import SHARE_GROUP, SUPPORTED, ApiKey, RequestHeader, encode_response, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

INT32_MIN = -(2**31)
_ZERO_UUID = uuid.UUID(int=0)
# KIP-430: without an authorizer every operation is allowed; asked for, the answer is the set of
# operations that apply (AclOperation codes as bits), not "unknown".
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ..ALTER_CONFIGS
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # CREATE..IDEMPOTENT_WRITE


def forwarding_controller_id(broker: HandlerContext, *, besides: int | None = None) -> int:
    """``controller_id`` in Metadata and DescribeCluster: as a KRaft broker answers (KIP-590),
    a random live broker, since every broker forwards controller-bound requests; -1 if none.
    Never a broker the controller has fenced, so an admin client does not pick a dead one, nor
    ``besides`` (a broker that left itself out of the answer's list)."""
    live = [int(b["node_id"]) for b in broker.live_brokers() if b["node_id"] != besides]
    return random.choice(live) if live else -1


def api_keys_table(share_groups: bool = False) -> list[dict[str, int]]:
    """ApiVersions' list; KIP-932's APIs only while share groups are on."""
    served = {**SUPPORTED, **SHARE_GROUP} if share_groups else SUPPORTED
    return [
        {"api_key": int(k), "min_version": r.min_version, "max_version": r.max_version}
        for k, r in sorted(served.items())
    ]


def features_fields(version: int, finalized: FinalizedFeatures) -> dict[str, Any]:
    """ApiVersions v3+'s tagged fields (KIP-584): the features this broker supports and the
    levels the cluster finalized. Before v4 a supported feature whose lowest level is 0 is left
    out (KAFKA-17011: older clients cannot read a range from 0); v4 lists them all."""
    if version < 3:
        return {}
    supported = [{"name": name, "min_version": low, "max_version": high}
                 for name, (low, high) in sorted(features.SUPPORTED.items())
                 if version >= 4 or low > 0]
    return {"supported_features": supported, "finalized_features_epoch": finalized.epoch,
            "finalized_features": [{"name": name, "max_version_level": level,
                                    "min_version_level": level}
                                   for name, level in finalized.levels]}


_API_VERSIONS_CACHE: dict[tuple[int, int, FinalizedFeatures], bytes] = {}


def api_versions(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection | None = None) -> list[bytes | memoryview]:
    # The body changes only with the finalized features, so the encoded bytes are cached per
    # version and features; only the correlation id differs (bytes 4..7 of the frame).
    share_groups = broker.share_groups_enabled
    finalized = broker.controller.finalized_features()
    key = (header.api_version, int(share_groups), finalized)
    cached = _API_VERSIONS_CACHE.get(key)
    if cached is None:
        parts = encode_response(
            ApiKey.API_VERSIONS, header.api_version, 0,
            {"error_code": 0, "api_keys": api_keys_table(share_groups), "throttle_time": 0,
             **features_fields(header.api_version, finalized)},
        )
        cached = b"".join(parts)
        _API_VERSIONS_CACHE[key] = cached
    return [cached[:4], header.correlation_id.to_bytes(4, "big", signed=True), cached[8:]]


def stepped_down_partitions(broker: HandlerContext) -> set[tuple[str, int]]:
    """The partitions this broker leads in its metadata but has stepped down from for clients
    (``replication.lease``: its controller session lapsed). Empty, at the cost of one clock
    read, unless its leadership is in doubt."""
    if not broker.membership.leadership_in_doubt():
        return set()
    now = broker.now_ms()
    return {key for key, ps in broker.partitions.items()
            if broker.membership.steps_down(ps.core, now)}


def _partition_entries(broker: HandlerContext, topic: str,
                       stepped_down: set[tuple[str, int]]) -> list[WireResponse]:
    meta = broker.controller.topics()[topic]
    return [
        {
            # No leader (yet, or none eligible): the client asks again. A partition this broker
            # stepped down from has none it can name: the controller may have elected another.
            "error_code": int(ErrorCode.LEADER_NOT_AVAILABLE)
            if p.leader < 0 or (topic, p.partition) in stepped_down else 0,
            "partition_index": p.partition,
            "leader_id": -1 if (topic, p.partition) in stepped_down else p.leader,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": [],
        }
        for p in meta.partitions
    ]


def metadata(broker: HandlerContext, header: RequestHeader, req: WireRequest,
             conn: ClientConnection | None = None) -> WireResponse | Awaitable[WireResponse]:
    """Answered at once, unless topics are to be created first (auto.create.topics.enable):
    then awaited, so only this request waits for the controller."""
    topics_meta = broker.controller.topics()
    requested = req.topics
    auto_create = bool(getattr(req, "allow_auto_topic_creation", True)) and bool(
        broker.config.value(AUTO_CREATE_TOPICS_ENABLE))
    missing = [t.name for t in requested or () if t.name is not None
               and t.name not in topics_meta] if auto_create else []
    if missing and not (requested is None or (header.api_version == 0 and not requested)):
        return _metadata_after_creating(broker, header, req, missing, conn)
    return _metadata_answer(broker, header, req, {}, conn)


async def _metadata_after_creating(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                                   missing: list[str], conn: ClientConnection | None
                                   ) -> WireResponse:
    errors: dict[str, ErrorCode] = {}
    for name in missing:
        try:
            await broker.create_topic(name, -1, -1, {})
            # On a cluster the new topic reaches this broker's metadata a moment later: answer
            # as Kafka does for a topic just created, and let the client retry.
            errors[name] = (ErrorCode.NONE if name in broker.controller.topics()
                            else ErrorCode.LEADER_NOT_AVAILABLE)
        except KafkaError as exc:
            errors[name] = exc.code
    return _metadata_answer(broker, header, req, errors, conn)


def _unknown_topic_error(name: str) -> ErrorCode:
    """What Metadata answers for a topic that does not exist: Kafka tells a name no topic can
    have (INVALID_TOPIC_EXCEPTION) from a valid one that is missing."""
    try:
        validate_topic_name(name)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _metadata_answer(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                     created: dict[str, ErrorCode], conn: ClientConnection | None
                     ) -> WireResponse:
    """``created``: what auto-creation answered for the topics it tried to create. The brokers
    are listed at their endpoints of the listener ``conn`` came in on."""
    version = header.api_version
    topics_meta = broker.controller.topics()
    requested = req.topics
    by_id: list[WireRequest] = []  # KIP-516: topics asked for by id (name null), answered by id
    if requested is None or (version == 0 and len(requested) == 0):
        names = list(topics_meta)
    else:
        names = [t.name for t in requested if t.name is not None]
        # By id from v12 (the response's name is nullable from there, as in Kafka).
        by_id = [t.topic_id for t in requested
                 if version >= 12 and t.name is None
                 and getattr(t, "topic_id", None) not in (None, _ZERO_UUID)]
    if by_id:
        known = {m.topic_id: m.name for m in topics_meta.values()}
        names += [known[i] for i in by_id if i in known]
    topic_ops = (TOPIC_OPERATIONS if getattr(req, "include_topic_authorized_operations", False)
                 else INT32_MIN)
    stepped_down = stepped_down_partitions(broker)
    out = []
    for name in names:
        if name not in topics_meta:
            error = created.get(name, _unknown_topic_error(name))
            if error is ErrorCode.NONE:
                error = ErrorCode.LEADER_NOT_AVAILABLE  # created, not in this image yet
            if error != ErrorCode.NONE:
                out.append({"error_code": int(error), "name": name, "topic_id": None,
                            "is_internal": False, "partitions": [],
                            "topic_authorized_operations": topic_ops})
                continue
        meta = topics_meta[name]
        out.append({
            "error_code": 0,
            "name": name,
            "topic_id": meta.topic_id,
            "is_internal": meta.internal,
            "partitions": _partition_entries(broker, name, stepped_down),
            "topic_authorized_operations": topic_ops,
        })
    for topic_id in by_id:
        if topic_id not in {m.topic_id for m in topics_meta.values()}:
            out.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "name": None,
                        "topic_id": topic_id, "is_internal": False, "partitions": [],
                        "topic_authorized_operations": topic_ops})
    brokers = broker.membership.listed_brokers(conn.listener_name if conn else None)
    if stepped_down:
        # As the controller sees it, this broker is fenced: leaving itself out of the list
        # makes librdkafka drop its connection here (brokers missing from Metadata are
        # decommissioned) and ask another broker, instead of asking this one again and again
        # (its most recently used connection).
        brokers = [b for b in brokers if b["node_id"] != broker.node_id]
    return {
        "throttle_time": 0,
        "error_code": 0,
        "brokers": brokers,
        "cluster_id": broker.controller.cluster_id,
        "controller_id": forwarding_controller_id(
            broker, besides=broker.node_id if stepped_down else None),
        "topics": out,
        "cluster_authorized_operations": (
            CLUSTER_OPERATIONS if getattr(req, "include_cluster_authorized_operations", False)
            else INT32_MIN),
    }


THROTTLED = "The throttling quota has been exceeded."


def _mutation_bucket(broker: HandlerContext, header: RequestHeader,
                     conn: ClientConnection | None, validate_only: bool) -> TokenBucket | None:
    """The connection's ``controller_mutation_rate`` bucket (KIP-599), None when no such quota
    applies or nothing will be mutated (validate_only)."""
    if validate_only or conn is None or not broker.quotas.active:
        return None
    return broker.quotas.mutation_bucket(conn.principal.name, header.client_id or "")


def _admit_mutation(broker: HandlerContext, bucket: TokenBucket | None, strict: bool) -> None:
    """Strict versions refuse a topic while the bucket is empty; older ones are admitted (and
    only throttled)."""
    if bucket is not None and strict and not bucket.admits(broker.now_ms()):
        raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)


def _took(broker: HandlerContext, bucket: TokenBucket | None, partitions: int) -> None:
    if bucket is not None:
        bucket.take(partitions, broker.now_ms())


async def create_topics(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                        conn: ClientConnection | None = None) -> WireResponse:
    """Every topic of the request is checked here, then all are handed to the controller at
    once (side by side, as Kafka's controller takes them in one event), and the answer waits
    at most the request's ``timeout_ms``: a topic not created by then answers
    REQUEST_TIMED_OUT (its creation may still complete, as in Kafka). A timeout of 0 or less
    is a deadline already past: Kafka's controller expires the event before it writes
    anything, so nothing is created and every topic answers REQUEST_TIMED_OUT."""
    validate_only = bool(getattr(req, "validate_only", False))
    timeout_ms = ms(getattr(req, "timeout", None))
    bucket = _mutation_bucket(broker, header, conn, validate_only)
    results: list[WireResponse] = []
    creations: dict[int, asyncio.Task[TopicMeta]] = {}
    mutations: dict[int, int] = {}
    seen: set[str] = set()
    for t in req.topics:
        entry: WireResponse = {"name": t.name, "topic_id": None, "error_code": 0,
                                 "error_message": None, "num_partitions": -1,
                                 "replication_factor": -1, "configs": []}
        results.append(entry)
        try:
            if t.name in seen:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "topic listed twice")
            seen.add(t.name)
            assignments = None
            if t.assignments:
                ordered = sorted(t.assignments, key=lambda a: int(a.partition_index))
                if [int(a.partition_index) for a in ordered] != list(range(len(ordered))):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "assigned partitions must be numbered 0..n-1")
                assignments = [tuple(int(b) for b in a.broker_ids) for a in ordered]
            configs = {c.name: c.value for c in t.configs}
            _admit_mutation(broker, bucket, header.api_version >= 6)
            if timeout_ms <= 0:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, TIMED_OUT)
            # The bucket is charged at admission, so the next topic of this request sees it
            # (KIP-599: topic by topic); given back if the controller refuses the topic.
            mutations[len(results) - 1] = max(0, len(assignments) if assignments else (
                int(t.num_partitions) if int(t.num_partitions) != -1
                else broker.config.value(NUM_PARTITIONS)))
            _took(broker, bucket, mutations[len(results) - 1])
            creations[len(results) - 1] = _held(asyncio.ensure_future(broker.create_topic(
                t.name, int(t.num_partitions), int(t.replication_factor), configs,
                validate_only=validate_only, assignments=assignments)))
        except KafkaError as exc:
            entry.update(error_code=int(exc.code), error_message=exc.message or None)
    if creations:
        await asyncio.wait(creations.values(), timeout=timeout_ms / 1000)
    for at, creation in creations.items():
        entry = results[at]
        if not creation.done():
            entry.update(error_code=int(ErrorCode.REQUEST_TIMED_OUT), error_message=TIMED_OUT)
            continue
        refused = creation.exception()
        if isinstance(refused, KafkaError):
            _took(broker, bucket, -mutations[at])
            entry.update(error_code=int(refused.code), error_message=refused.message or None)
            continue
        meta = creation.result()  # (any other exception is the handler's, as before)
        entry.update(topic_id=meta.topic_id, num_partitions=len(meta.partitions),
                     replication_factor=len(meta.partitions[0].replicas))
        if header.api_version >= 5:  # KIP-525: the new topic's configs, as described
            entry["configs"] = [
                {k: c[k] for k in ("name", "value", "read_only", "config_source",
                                   "is_sensitive")}
                for c in _topic_entries(broker, meta.configs, False)]
    return {"throttle_time": broker.quotas.mutation_throttled(bucket, conn), "topics": results}


TIMED_OUT = "The request timed out."
_CREATING: set[asyncio.Task[TopicMeta]] = set()


def _held(creation: asyncio.Task[TopicMeta]) -> asyncio.Task[TopicMeta]:
    """Every creation or deletion runs to its end even when the answer stops waiting for it
    (past ``timeout_ms``, or the client went away and its request was cancelled: the controller
    may commit it yet, as Kafka's does); held here until then, and its outcome is retrieved, so
    a refusal nobody waits for any more is not logged as an error."""
    _CREATING.add(creation)

    def done(task: asyncio.Task[TopicMeta]) -> None:
        _CREATING.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" traceback

    creation.add_done_callback(done)
    return creation


async def delete_topics(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                        conn: ClientConnection | None = None) -> WireResponse:
    """The topics are deleted one by one within one deadline, the request's ``timeout_ms``
    (Kafka's controller gives the request's event that deadline): a deletion the controller
    has not committed by then answers REQUEST_TIMED_OUT, and goes on (it may still complete,
    as in Kafka); a topic reached past the deadline (a timeout of 0 or less included) is not
    asked for, and answers REQUEST_TIMED_OUT."""
    if header.api_version >= 6:
        names = [(t.name, t.topic_id) for t in req.topics]
    else:
        names = [(n, None) for n in req.topic_names]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(getattr(req, "timeout", None)) / 1000
    results = []
    bucket = _mutation_bucket(broker, header, conn, False)
    by_id = {m.topic_id: m.name for m in broker.controller.topics().values()}
    for name, topic_id in names:
        if name is None and topic_id is not None:
            name = by_id.get(topic_id)
        entry: WireResponse = {"name": name, "topic_id": topic_id, "error_code": 0,
                                 "error_message": None}
        try:
            if name is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic id")
            _admit_mutation(broker, bucket, header.api_version >= 5)
            if (remaining := deadline - loop.time()) <= 0:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, TIMED_OUT)
            deletion = _held(asyncio.ensure_future(broker.delete_topic(name)))
            await asyncio.wait({deletion}, timeout=remaining)
            if not deletion.done():
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, TIMED_OUT)
            meta = deletion.result()
            _took(broker, bucket, len(meta.partitions))
            entry["topic_id"] = meta.topic_id
        except KafkaError as exc:
            entry.update(error_code=int(exc.code), error_message=exc.message or None)
        results.append(entry)
    return {"throttle_time": broker.quotas.mutation_throttled(bucket, conn),
            "responses": results}


async def create_partitions(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection | None = None) -> WireResponse:
    results = []
    bucket = _mutation_bucket(broker, header, conn, bool(req.validate_only))
    for t in req.topics:
        entry: WireResponse = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            assignments = (None if not t.assignments else
                           [tuple(int(b) for b in a.broker_ids) for a in t.assignments])
            before = broker.controller.topics().get(t.name)
            _admit_mutation(broker, bucket, header.api_version >= 3)
            await broker.create_partitions(t.name, int(t.count),
                                           validate_only=bool(req.validate_only),
                                           assignments=assignments)
            _took(broker, bucket, int(t.count) - (len(before.partitions) if before else 0))
        except KafkaError as exc:
            entry.update(error_code=int(exc.code), error_message=exc.message or None)
        results.append(entry)
    return {"throttle_time": broker.quotas.mutation_throttled(bucket, conn), "results": results}


_TOPIC_RESOURCE = 2
_BROKER_RESOURCE = 4
_GROUP_RESOURCE = 32  # KIP-848 / KIP-932 group configs (floodmark.group_configs)


def describe_configs(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection | None = None) -> WireResponse:
    """Topics: every topic config, its own value or the broker's (with that one's source).
    Brokers: this broker's every setting with its source and read-only flag; the cluster-wide
    default resource ("") lists the dynamic defaults set. Synonyms (v1+, when asked) give
    every layer that holds a value, most specific first."""
    synonyms = bool(getattr(req, "include_synonyms", False))
    results = []
    for res in req.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        entry: WireResponse = {"error_code": 0, "error_message": None,
                                 "resource_type": int(res.resource_type),
                                 "resource_name": res.resource_name, "configs": []}
        configs: list[WireResponse] = []
        if res.resource_type == _TOPIC_RESOURCE:
            meta = broker.controller.topics().get(res.resource_name)
            if meta is None:
                entry.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                             error_message=f"unknown topic {res.resource_name!r}")
            else:
                configs = _topic_entries(broker, meta.configs, synonyms)
        elif res.resource_type == _BROKER_RESOURCE:
            if res.resource_name == "":
                default = broker.config.dynamic.cluster_default
                configs = [_entry(name, [(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                          default[name])], name, synonyms)
                           for name in sorted(default)]
            elif res.resource_name != str(broker.node_id):
                entry.update(error_code=int(ErrorCode.INVALID_REQUEST),
                             error_message=f"Unexpected broker id, expected {broker.node_id} "
                                           f"or empty string, but received "
                                           f"{res.resource_name}")
            else:
                listeners = _listener_settings(broker)
                names = sorted(set(SETTINGS) | set(broker.config.settings) | set(listeners))
                configs = [_entry(name, broker.config.sources(name)
                                  or [(ConfigSource.STATIC_BROKER_CONFIG, listeners[name])],
                                  name, synonyms)
                           for name in names]
        elif res.resource_type == _GROUP_RESOURCE:
            try:
                configs = group_config_admin.describe(broker, res.resource_name, synonyms)
            except KafkaError as exc:
                entry.update(error_code=int(exc.code), error_message=exc.message)
        else:
            entry.update(error_code=int(ErrorCode.INVALID_REQUEST),
                         error_message=f"unsupported resource type {res.resource_type}")
        if keys is not None:
            configs = [c for c in configs if c["name"] in keys]
        entry["configs"] = configs
        results.append(entry)
    return {"throttle_time": 0, "results": results}


def _listener_settings(broker: HandlerContext) -> dict[str, str]:
    """``listeners`` and ``advertised.listeners`` in Kafka's notation, as this broker runs them
    (bound ports filled in), for a broker that did not set them itself (``--listen``,
    ``--advertised``): Kafka always reports both."""
    listeners = ",".join(
        f"{ep.name}://{ep.host}:{ep.port or broker.bound_ports.get(ep.name, 0)}"
        for ep in broker.config.listeners.listeners)
    advertised = ",".join(f"{ep.name}://{ep.host}:{ep.port}"
                          for ep in broker.advertised_endpoints())
    return {"listeners": listeners, "advertised.listeners": advertised}


def _topic_entries(broker: HandlerContext, own: Configs, synonyms: bool) -> list[WireResponse]:
    defaults = broker.config.topic_defaults()
    out = []
    for name in sorted(set(defaults) | set(own)):
        broker_name = TOPIC_CONFIG_DEFAULTS.get(name)
        chain: list[tuple[ConfigSource, ConfigValue]] = []
        if name in own:
            chain.append((ConfigSource.DYNAMIC_TOPIC_CONFIG, own[name]))
        if broker_name is not None:
            # A broker setting without a value of its own (null: log.flush.interval.ms,
            # log.roll.ms) is no synonym; Kafka lists none and answers the topic default.
            chain += [(src, v) for src, v in broker.config.sources(broker_name)
                      if v is not None]  # a null setting is no layer (it has no value)
        setting = topic_config_setting(name)
        entry = _entry(name, chain or [(ConfigSource.DEFAULT_CONFIG, defaults.get(name))],
                       broker_name or name, synonyms, topic=True,
                       config_type=setting.type if setting is not None else None)
        if not chain:  # Kafka's topic default, no setting behind it: no synonym to list
            entry["synonyms"] = []
        out.append(entry)
    return out


def _entry(name: str, chain: list[tuple[ConfigSource, ConfigValue]], synonym_name: str,
           synonyms: bool, *, topic: bool = False,
           config_type: ConfigType | None = None) -> WireResponse:
    """One DescribeConfigs entry: the first layer of ``chain`` is in force."""
    source, value = chain[0] if chain else (ConfigSource.DEFAULT_CONFIG, None)
    setting = SETTINGS.get(synonym_name)
    read_only = not topic and (setting is None or not setting.dynamic)
    secret = is_sensitive(name)  # a password: never sent back (Kafka answers null)
    return {
        "name": name,
        "value": None if secret else render(value),
        "read_only": read_only,
        "is_default": source is ConfigSource.DEFAULT_CONFIG,
        "config_source": int(source),
        "is_sensitive": secret,
        # Kafka lists no synonym without a value (log.retention.ms while the hours form applies)
        "synonyms": [{"name": name if src is ConfigSource.DYNAMIC_TOPIC_CONFIG else synonym_name,
                      "value": None if secret else render(v), "source": int(src)}
                     for src, v in chain if v is not None]
        if synonyms else [],
        "config_type": int(config_type if config_type is not None
                           else setting.type if setting is not None else _config_type(value)),
        "documentation": None,
    }


def _config_type(value: ConfigValue) -> ConfigType:
    if isinstance(value, bool):
        return ConfigType.BOOLEAN
    if isinstance(value, int):
        return ConfigType.LONG
    if isinstance(value, float):
        return ConfigType.DOUBLE
    return ConfigType.STRING


def validate_name(name: str) -> None:
    validate_topic_name(name)


_ENDPOINT_TYPES = {1: "BROKER", 2: "CONTROLLER"}


def describe_cluster(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection | None = None
                     ) -> WireResponse:
    """KIP-700: the live brokers and the cluster id. Admin clients send controller-bound
    requests to ``controller_id``: a random live broker, which forwards them (KIP-590)."""
    wanted = int(getattr(req, "endpoint_type", 1))
    if wanted != 1:  # 1 = brokers; 2 = controllers (KIP-919): every listener is a broker's
        return {"throttle_time": 0, "error_code": int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                "error_message": "The request was sent to an endpoint of type BROKER, but we "
                                 f"wanted an endpoint of type {_ENDPOINT_TYPES.get(wanted, 'UNKNOWN')}",
                "endpoint_type": 1, "cluster_id": "", "controller_id": -1,
                "brokers": [], "cluster_authorized_operations": INT32_MIN}
    listener = conn.listener_name if conn else None
    brokers = [(b, False) for b in broker.live_brokers(listener)]
    if getattr(req, "include_fenced_brokers", False):  # v2, KIP-1073
        brokers += [(b, True) for b in broker.membership.fenced_brokers(listener)]
    return {
        "throttle_time": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
        "cluster_id": broker.controller.cluster_id,
        "controller_id": forwarding_controller_id(broker),
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                     "rack": b["rack"], "is_fenced": fenced}
                    for b, fenced in sorted(brokers, key=lambda bf: bf[0]["node_id"])],
        "cluster_authorized_operations": (
            CLUSTER_OPERATIONS if getattr(req, "include_cluster_authorized_operations", False)
            else INT32_MIN),
    }


def describe_log_dirs(broker: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection | None = None
                      ) -> WireResponse:
    """One result per log directory (``log.dirs``), each with its total and usable bytes (v4)
    and every replica it holds: its size on disk and its offset lag (HW - LEO when a follower
    is behind the HW it was told, else 0). A replica being moved (AlterReplicaLogDirs) is also
    listed in its destination with ``is_future_key`` set. A failed directory answers
    KAFKA_STORAGE_ERROR and lists nothing."""
    wanted = (None if req.topics is None
              else {(t.topic, int(p)) for t in req.topics for p in t.partitions})
    storage = broker.storage
    per_dir: dict[Path, dict[str, list[WireResponse]]] = {d.path: {} for d in storage.dirs}
    for (topic, index), ps in sorted(broker.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        where = storage.dir_of(topic, index)
        if where is None:
            continue
        per_dir[where.path].setdefault(topic, []).append({
            "partition_index": index, "partition_size": ps.log.size_bytes,
            "offset_lag": max(0, ps.high_watermark - ps.log_end_offset),
            "is_future_key": False})
        future = storage.moving.get((topic, index))
        if future is not None:
            per_dir[future.destination.path].setdefault(topic, []).append({
                "partition_index": index, "partition_size": future.copied_bytes,
                "offset_lag": max(0, ps.log_end_offset - future.copied_log_end_offset),
                "is_future_key": True})
    return {"throttle_time": 0, "error_code": 0, "results": [
        {"error_code": 0, "log_dir": str(d.path.resolve()),
         "topics": [{"name": n, "partitions": ps} for n, ps in per_dir[d.path].items()],
         "total_bytes": d.total_bytes(), "usable_bytes": d.usable_bytes()}
        if d.offline is None else  # a failed directory: Kafka's answer, nothing listed
        {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": str(d.path.resolve()),
         "topics": [], "total_bytes": -1, "usable_bytes": -1}
        for d in storage.dirs]}


def alter_replica_log_dirs(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                           conn: ClientConnection | None = None) -> WireResponse:
    """Move replicas between this broker's log directories while they serve (KIP-113; see
    ``replica_mover``). Per partition: LOG_DIR_NOT_FOUND when the path is not one of this
    broker's ``log.dirs``; REPLICA_NOT_AVAILABLE when the broker does not host the replica (Kafka
    may remember the wish for a replica created later; floodmark does not) or a move of it to
    another directory is under way; NONE when it is already there, or the move has started
    (DescribeLogDirs shows the copy with ``is_future_key`` until it is swapped in);
    KAFKA_STORAGE_ERROR when the replica's directory or the destination has failed."""
    storage = broker.storage
    by_topic: dict[str, list[WireResponse]] = {}
    for entry in req.dirs:
        destination = storage.dir_named(str(entry.path))
        for topic in entry.topics:
            for index in topic.partitions:
                key = (str(topic.name), int(index))
                if destination is None:
                    code = ErrorCode.LOG_DIR_NOT_FOUND
                elif key not in broker.partitions or storage.dir_of(*key) is None:
                    code = ErrorCode.REPLICA_NOT_AVAILABLE
                elif destination.offline is not None or storage.is_offline(key):
                    code = ErrorCode.KAFKA_STORAGE_ERROR
                elif (moving := storage.moving.get(key)) is not None:
                    code = (ErrorCode.NONE if moving.destination is destination
                            else ErrorCode.REPLICA_NOT_AVAILABLE)
                elif storage.dir_of(*key) is destination:
                    code = ErrorCode.NONE
                else:
                    broker.move_replica(key, destination)
                    code = ErrorCode.NONE
                by_topic.setdefault(key[0], []).append(
                    {"partition_index": key[1], "error_code": int(code)})
    return {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": parts} for name, parts in by_topic.items()]}


async def elect_leaders(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                        conn: ClientConnection | None = None) -> WireResponse:
    """ElectLeaders (KIP-460): PREFERRED (0) or UNCLEAN (1), decided by the controller; every
    partition when ``topic_partitions`` is null."""
    unclean = int(getattr(req, "election_type", 0)) == 1
    if req.topic_partitions is None:
        wanted = [(name, p.partition) for name, meta in broker.controller.topics().items()
                  for p in meta.partitions]
    else:
        wanted = [(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions]
    by_topic: dict[str, list[WireResponse]] = {}
    try:
        decided = await broker.controller.elect_leaders(wanted, unclean=unclean)
    except KafkaError as exc:  # no controller answered (REQUEST_TIMED_OUT, NOT_CONTROLLER)
        return {"throttle_time": 0, "error_code": int(exc.code),
                "replica_election_results": []}
    for topic, partition, err, message in decided:
        by_topic.setdefault(topic, []).append({
            "partition_id": partition, "error_code": int(err),
            "error_message": message or None})
    return {"throttle_time": 0, "error_code": 0, "replica_election_results": [
        {"topic": t, "partition_result": parts} for t, parts in by_topic.items()]}


# IncrementalAlterConfigs operations (KIP-339)
_OP_SET, _OP_DELETE, _OP_APPEND, _OP_SUBTRACT = 0, 1, 2, 3
_LIST_CONFIGS = frozenset({"cleanup.policy", "log.cleanup.policy"})


async def _alter_resource(broker: HandlerContext, res: WireRequest, validate_only: bool,
                          new_configs: Callable[[Configs, Configs], Configs]
                          ) -> WireResponse:
    """``new_configs(current, defaults)``: the resource's whole new set."""
    out: WireResponse = {"error_code": 0, "error_message": None,
                           "resource_type": int(res.resource_type),
                           "resource_name": res.resource_name}
    try:
        if res.resource_type == _BROKER_RESOURCE:  # KIP-226 dynamic broker configs
            current = dict(broker.controller.broker_configs().get(res.resource_name, {}))
            in_force = {name: broker.config.get(name) for name in SETTINGS}
            await dynamic_configs.alter(broker, res.resource_name,
                                        new_configs(current, in_force),
                                        validate_only=validate_only)
            return out
        if res.resource_type == _GROUP_RESOURCE:  # KIP-848 / KIP-932 group configs
            current = group_config_admin.current(broker, res.resource_name)
            in_force = {name: broker.config.get(name) for name in SETTINGS}
            await group_config_admin.alter(broker, res.resource_name,
                                           new_configs(current, in_force),
                                           validate_only=validate_only)
            return out
        if res.resource_type != _TOPIC_RESOURCE:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"unsupported resource type {res.resource_type}")
        meta = broker.controller.topics().get(res.resource_name)
        if meta is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"unknown topic {res.resource_name!r}")
        await broker.alter_topic_configs(
            res.resource_name, new_configs(dict(meta.configs), broker.config.topic_defaults()),
            validate_only=validate_only)
    except KafkaError as exc:
        out.update(error_code=int(exc.code), error_message=exc.message or exc.code.name)
    return out


async def incremental_alter_configs(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                                    conn: ClientConnection | None = None) -> WireResponse:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT (list configs) per key."""
    responses = []
    for res in req.resources:
        def apply(current: Configs, defaults: Configs,
                  res: WireRequest = res) -> Configs:
            for c in res.configs:
                op, name, value = int(c.config_operation), str(c.name), c.value
                if op == _OP_SET:
                    if value is None:  # Kafka's ConfigurationControlManager, every resource
                        raise KafkaError(ErrorCode.INVALID_REQUEST,
                                         f"Null value not supported for : {name}")
                    current[name] = value
                elif op == _OP_DELETE:
                    current.pop(name, None)
                elif op in (_OP_APPEND, _OP_SUBTRACT):
                    if name not in _LIST_CONFIGS:
                        raise KafkaError(ErrorCode.INVALID_CONFIG,
                                         f"Can't {'APPEND' if op == _OP_APPEND else 'SUBTRACT'}"
                                         f" to key {name} because its type is not LIST.")
                    now = render(current.get(name, defaults.get(name, ""))) or ""
                    items = [x for x in now.split(",") if x]
                    change = [x.strip() for x in str(value or "").split(",") if x.strip()]
                    if op == _OP_APPEND:
                        items += [x for x in change if x not in items]
                    else:
                        items = [x for x in items if x not in change]
                    current[name] = ",".join(items)
                else:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown operation {op}")
            return current

        responses.append(await _alter_resource(broker, res, bool(req.validate_only), apply))
    return {"throttle_time": 0, "responses": responses}


async def alter_configs(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                        conn: ClientConnection | None = None) -> WireResponse:
    """AlterConfigs (the older call): the request's entries replace the topic's whole set."""
    responses = []
    for res in req.resources:
        entries = {str(c.name): c.value for c in res.configs if c.value is not None}

        def replace_all(_current: Configs, _defaults: Configs,
                        e: Configs = entries) -> Configs:
            return dict(e)

        responses.append(await _alter_resource(broker, res, bool(req.validate_only),
                                               replace_all))
    return {"throttle_time": 0, "responses": responses}


async def alter_partition_reassignments(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                                        conn: ClientConnection | None = None) -> WireResponse:
    """AlterPartitionReassignments (KIP-455): per partition a target replica list (start, or
    replace the one in progress) or null (cancel); decided by the controller, carried out by
    ordinary replication (docs/cluster.md, "Moving replicas"). v1 (KIP-860): a change of the
    replication factor is refused unless ``allow_replication_factor_change``."""
    allow_rf_change = bool(getattr(req, "allow_replication_factor_change", True))
    topics = broker.controller.topics()
    changes: list[tuple[str, int, tuple[int, ...] | None]] = []
    refused: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    for t in req.topics:
        for p in t.partitions:
            key = (t.name, int(p.partition_index))
            target = None if p.replicas is None else tuple(int(b) for b in p.replicas)
            meta = topics.get(t.name)
            if meta is None or not 0 <= key[1] < len(meta.partitions):
                refused[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                f"unknown partition {t.name}-{key[1]}")
                continue
            ongoing = broker.controller.reassignments().get(key)
            current_rf = (len(ongoing.target) if ongoing is not None
                          else len(meta.partitions[key[1]].replicas))
            if target is not None and not allow_rf_change and len(target) != current_rf:
                refused[key] = (ErrorCode.INVALID_REPLICATION_FACTOR,
                                f"The replication factor is changed from {current_rf} to "
                                f"{len(target)}")
                continue
            changes.append((key[0], key[1], target))
    try:
        answers = await broker.controller.alter_partition_reassignments(changes) if changes else []
    except KafkaError as exc:  # no controller answered (REQUEST_TIMED_OUT, NOT_CONTROLLER)
        return {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change,
                "error_code": int(exc.code), "error_message": exc.message or None,
                "responses": []}
    decided = {(topic, partition): (err, message)
               for topic, partition, err, message in answers}
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            key = (t.name, int(p.partition_index))
            err, message = refused.get(key) or decided.get(key, (ErrorCode.NONE, ""))
            parts.append({"partition_index": key[1], "error_code": int(err),
                          "error_message": message or None})
        responses.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "allow_replication_factor_change": allow_rf_change,
            "error_code": 0, "error_message": None, "responses": responses}


def list_partition_reassignments(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                                 conn: ClientConnection | None = None) -> WireResponse:
    """ListPartitionReassignments: the moves in progress (all, or the partitions asked for),
    each with the partition's current replicas and the ones being added and removed."""
    ongoing = broker.controller.reassignments()
    wanted = (None if req.topics is None
              else {(t.name, int(p)) for t in req.topics for p in t.partition_indexes})
    topics = broker.controller.topics()
    by_topic: dict[str, list[WireResponse]] = {}
    for (topic, index), move in sorted(ongoing.items()):
        meta = topics.get(topic)
        if meta is None or (wanted is not None and (topic, index) not in wanted):
            continue
        by_topic.setdefault(topic, []).append({
            "partition_index": index, "replicas": list(meta.partitions[index].replicas),
            "adding_replicas": list(move.adding), "removing_replicas": list(move.removing)})
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]}
