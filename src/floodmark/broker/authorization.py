"""Authorization: one check at dispatch, before any handler runs (DESIGN §security).

``CHECKS`` holds, per API, exactly the operations Kafka's ``KafkaApis`` checks for it (Kafka's
"Operations and Resources on Protocols" table). A check looks at the decoded request and the
caller (principal, client host) and gives a ``Verdict``:

* None: everything asked for is allowed; the handler runs on the request as it came;
* ``refused``: the whole request is refused; this is the answer and the handler never runs
  (e.g. JoinGroup without Read on the group: GROUP_AUTHORIZATION_FAILED);
* ``request`` + ``finish``: part of it is refused (a topic of a CreateTopics, a partition of an
  OffsetCommit): the handler runs on the allowed part only, so nothing is written for the rest,
  and ``finish`` adds the refused parts to its answer with their authorization error (and hides
  what the caller may not Describe, or fills KIP-430's authorized operations);
* ``handler``: for the hot paths whose answers are encoded by hand (Fetch), the handler to run
  instead, told which topics to refuse. Produce, which never decodes through kio, is given a
  ``ProduceGate`` by dispatch (``produce_gate``).

With no authorizer configured (``authorizer.class.name`` unset) dispatch never comes here.
Who the caller is belongs to the connection (``Connection.principal``, ``client_host``).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.context import Handler, HandlerContext
from floodmark.broker.handlers import HANDLERS, data, replication
from floodmark.broker.handlers.delegation_tokens.create import owner_of, refused
from floodmark.broker.replica_fetcher import replica_of
from floodmark.errors import ErrorCode
from floodmark.security import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AclOperation,
    Authorizer,
    AuthorizerSettings,
    KafkaPrincipal,
    ResourceType,
    authorizer_settings,
)
from floodmark.wire import SERVED, ApiKey, ProduceRequest, RequestHeader

Op = AclOperation
RT = ResourceType
_NO_START_TIME = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
"""A refused DescribeTransactions entry's start time (Kafka writes -1, which kio cannot)."""
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, and the rules that answer."""

    authorizer: Authorizer
    principal: KafkaPrincipal
    host: str

    def may(self, op: AclOperation, rt: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rt, name)

    def may_cluster(self, op: AclOperation) -> bool:
        return self.may(op, RT.CLUSTER, CLUSTER_NAME)

    def may_any(self, op: AclOperation, rt: ResourceType) -> bool:
        return self.authorizer.authorize_any(self.principal, self.host, op, rt)

    def operations(self, rt: ResourceType, name: str) -> int:
        return self.authorizer.authorized_operations(self.principal, self.host, rt, name)


Finish = Callable[[WireResponse], WireResponse]


@dataclass(frozen=True, slots=True)
class Verdict:
    refused: WireResponse | None = None
    request: WireRequest | None = None
    finish: Finish | None = None
    handler: Handler | None = None


Check = Callable[[Caller, RequestHeader, WireRequest, HandlerContext], Verdict | None]


class Authorization:
    """The broker's authorization: the settings, and the ACLs its metadata holds (read at
    every request, so a record applied is in force for the next request)."""

    def __init__(self, settings: AuthorizerSettings, ctx: HandlerContext) -> None:
        self.settings = settings
        self.ctx = ctx

    @classmethod
    def configured(cls, ctx: HandlerContext) -> Authorization | None:
        """None when ``authorizer.class.name`` is unset: nothing is checked, as today."""
        settings = authorizer_settings(
            str(ctx.config.get("authorizer.class.name") or ""),
            str(ctx.config.get("super.users") or ""),
            ctx.config.get_bool("allow.everyone.if.no.acl.found"))
        return None if settings is None else cls(settings, ctx)

    def caller(self, conn: ClientConnection) -> Caller:
        return Caller(Authorizer(self.ctx.controller.acls(), self.settings), conn.principal,
                      conn.client_host)

    def check(self, header: RequestHeader, req: WireRequest,
              conn: ClientConnection) -> Verdict | None:
        return CHECKS[ApiKey(header.api_key)](self.caller(conn), header, req, self.ctx)

    def produce_gate(self, conn: ClientConnection) -> data.ProduceGate:
        return produce_gate(self.caller(conn))


# -- building blocks ---------------------------------------------------------------------------
def _refuse(**fields: Any) -> Verdict:
    return Verdict(refused=fields)


def _add(field: str, extra: list[WireResponse]) -> Finish:
    def finish(resp: WireResponse) -> WireResponse:
        return {**resp, field: [*resp.get(field, ()), *extra]}
    return finish


def _then(*finishes: Finish | None) -> Finish | None:
    chain = [f for f in finishes if f is not None]
    if not chain:
        return None

    def finish(resp: WireResponse) -> WireResponse:
        for f in chain:
            resp = f(resp)
        return resp
    return finish


def _split(items: Iterable[Any], allowed: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    kept: list[Any] = []
    refused: list[Any] = []
    for item in items:
        (kept if allowed(item) else refused).append(item)
    return kept, refused


def _narrow(req: WireRequest, field: str, kept: list[Any], finish: Finish | None) -> Verdict:
    return Verdict(request=dataclasses.replace(req, **{field: tuple(kept)}), finish=finish)


def _partitions(t: WireRequest, index_field: str = "partition_index") -> list[int]:
    return [int(p if isinstance(p, int) else getattr(p, index_field)) for p in t.partitions]


def _per_partition(name_field: str, topics: list[Any], error: int, index_field: str,
                   error_field: str = "error_code", request_index: str = "partition_index",
                   **extra: Any) -> list[WireResponse]:
    return [{name_field: getattr(t, name_field if hasattr(t, name_field) else "name"),
             "partitions": [{index_field: i, error_field: error, **extra}
                            for i in _partitions(t, request_index)]} for t in topics]


def _cluster(op: AclOperation, **refused: Any) -> Check:
    """A request about the cluster as a whole: allowed, or answered with ``refused``."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        return None if caller.may_cluster(op) else _refuse(**refused)
    return check


def _group(op: AclOperation) -> Check:
    """A request about one group (``group_id``), answered GROUP_AUTHORIZATION_FAILED."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        return None if caller.may(op, RT.GROUP, req.group_id) else _refuse(
            error_code=GROUP_DENIED)
    return check


def _topics(op: AclOperation, topics_field: str, response_field: str, name_field: str,
            refused_entry: Callable[[Any], WireResponse]) -> Check:
    """Per topic of ``topics_field``: the allowed ones go to the handler, each refused one is
    answered ``refused_entry(topic)`` in ``response_field``."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        kept, refused = _split(getattr(req, topics_field),
                               lambda t: caller.may(op, RT.TOPIC, getattr(t, name_field)))
        if not refused:
            return None
        return _narrow(req, topics_field, kept,
                       _add(response_field, [refused_entry(t) for t in refused]))
    return check


def _partition_topics(op: AclOperation, *, name_field: str = "name",
                      index_field: str = "partition_index", request_index: str = "partition_index",
                      **extra: Any) -> Check:
    """``topics[name, partitions]`` in the request and the answer (ListOffsets, DeleteRecords,
    OffsetCommit, ...): each partition of a refused topic answers TOPIC_AUTHORIZATION_FAILED."""
    return _topics(op, "topics", "topics", name_field, lambda t: {
        name_field: getattr(t, name_field),
        "partitions": [{index_field: i, "error_code": TOPIC_DENIED, **extra}
                       for i in _partitions(t, request_index)]})


# -- data ----------------------------------------------------------------------------------
def produce_gate(caller: Caller) -> data.ProduceGate:
    """Produce: Write on the TransactionalId of a transactional produce (else every partition
    answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Write on each topic. Since KIP-679 (Kafka
    3.0) an idempotent produce needs no IdempotentWrite on the cluster."""
    def gate(req: ProduceRequest) -> dict[tuple[str, int], ErrorCode]:
        if req.transactional_id is not None and not caller.may(
                Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
            return {(name, p.index): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                    for name, parts in req.topics for p in parts}
        out: dict[tuple[str, int], ErrorCode] = {}
        for name, parts in req.topics:
            if not caller.may(Op.WRITE, RT.TOPIC, name):
                out.update({(name, p.index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                            for p in parts})
        return out
    return gate


def _fetch(caller: Caller, header: RequestHeader, req: WireRequest,
           ctx: HandlerContext) -> Verdict | None:
    """A replica's Fetch needs ClusterAction on the cluster (without it every partition answers
    TOPIC_AUTHORIZATION_FAILED, as Kafka answers); a consumer's, Read on each topic. Topics of
    an incremental fetch session are checked at every fetch, not only when added."""
    if replica_of(req, header.api_version)[0] >= 0:
        if caller.may_cluster(Op.CLUSTER_ACTION):
            return None
        return Verdict(handler=functools.partial(
            data.fetch, denied=lambda _name: ErrorCode.TOPIC_AUTHORIZATION_FAILED))

    def denied(name: str) -> ErrorCode | None:
        return None if caller.may(Op.READ, RT.TOPIC, name) else \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return Verdict(handler=functools.partial(replication.fetch, denied=denied))


def _offset_for_leader_epoch(caller: Caller, header: RequestHeader, req: WireRequest,
                             ctx: HandlerContext) -> Verdict | None:
    """ClusterAction on the cluster allows every topic; without it, Describe on each topic
    (KIP-320: consumers ask too), whoever asks (``replica_id`` is not looked at, as Kafka);
    a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED."""
    if caller.may_cluster(Op.CLUSTER_ACTION):
        return None
    return _partition_topics(Op.DESCRIBE, name_field="topic", index_field="partition",
                             request_index="partition", leader_epoch=-1, end_offset=-1)(
        caller, header, req, ctx)


# -- metadata -----------------------------------------------------------------------------------
def _metadata(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
    """Describe on each topic named (else TOPIC_AUTHORIZATION_FAILED, whether it exists or
    not); Create (on the cluster or the topic) for one auto-creation would make; an
    all-topics request lists only the topics the caller may Describe. KIP-430 operations."""
    existing = ctx.controller.topics()
    may_create_all = caller.may_cluster(Op.CREATE)
    auto_create = bool(getattr(req, "allow_auto_topic_creation", True)) and \
        ctx.config.get_bool("auto.create.topics.enable")
    refused_names: list[str] = []
    finish: Finish | None = None
    if req.topics is not None and not (header.api_version == 0 and not req.topics):
        def allowed(t: WireRequest) -> bool:
            if t.name is None:
                return True  # by id: answered below, by the name it resolves to
            if not caller.may(Op.DESCRIBE, RT.TOPIC, t.name):
                return False
            return t.name in existing or not auto_create or may_create_all or caller.may(
                Op.CREATE, RT.TOPIC, t.name)
        kept, refused = _split(req.topics, allowed)
        refused_names = [t.name for t in refused]
        if refused:
            req = dataclasses.replace(req, topics=tuple(kept))
    topic_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    cluster_ops = bool(getattr(req, "include_cluster_authorized_operations", False))

    def finish_(resp: WireResponse) -> WireResponse:
        topics = []
        for t in resp.get("topics", ()):
            name = t.get("name")
            if name is not None and t.get("error_code", 0) == 0 and not caller.may(
                    Op.DESCRIBE, RT.TOPIC, name):
                if req.topics is None:
                    continue  # all topics: hidden
                t = {**t, "error_code": TOPIC_DENIED, "partitions": []}
            if topic_ops and name is not None and t.get("error_code", 0) == 0:
                t = {**t, "topic_authorized_operations": caller.operations(RT.TOPIC, name)}
            topics.append(t)
        topics += [{"error_code": TOPIC_DENIED, "name": n, "topic_id": None,
                    "is_internal": False, "partitions": [],
                    "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
                   for n in refused_names]
        out = {**resp, "topics": topics}
        if cluster_ops:
            out["cluster_authorized_operations"] = _cluster_operations(caller)
        return out
    finish = finish_
    return Verdict(request=req, finish=finish)


def _describe_topic_partitions(caller: Caller, header: RequestHeader, req: WireRequest,
                               ctx: HandlerContext) -> Verdict | None:
    """Describe on each topic (KIP-966), checked by the handler in its own order (paging
    counts only the topics shown): a named topic refused answers TOPIC_AUTHORIZATION_FAILED,
    an all-topics request leaves it out. KIP-430 operations for each topic shown."""
    return Verdict(handler=functools.partial(
        cast(Callable[..., HandlerResult], HANDLERS[ApiKey.DESCRIBE_TOPIC_PARTITIONS]),
        may_describe=lambda name: caller.may(Op.DESCRIBE, RT.TOPIC, name),
        operations=lambda name: caller.operations(RT.TOPIC, name)))


def _cluster_operations(caller: Caller) -> int:
    """KIP-430's cluster operations, as Kafka computes them: 0 without Describe."""
    if not caller.may_cluster(Op.DESCRIBE):
        return 0
    return caller.operations(RT.CLUSTER, CLUSTER_NAME)


def _describe_cluster(caller: Caller, header: RequestHeader, req: WireRequest,
                      ctx: HandlerContext) -> Verdict | None:
    """Answered to anyone (Kafka's table lists Describe on the cluster, but ``KafkaApis``
    checks it only for KIP-430's operations, which are 0 without it)."""
    if not getattr(req, "include_cluster_authorized_operations", False):
        return None
    bits = _cluster_operations(caller)
    return Verdict(request=req, finish=lambda r: {**r, "cluster_authorized_operations": bits})


# -- topics and configs -------------------------------------------------------------------------
def _create_topics(caller: Caller, header: RequestHeader, req: WireRequest,
                   ctx: HandlerContext) -> Verdict | None:
    """Create on the cluster, else Create on each topic; a created topic's configs, partition
    count and replication factor are answered only with DescribeConfigs on it (else
    ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED, as Kafka)."""
    verdict: Verdict | None = None
    if not caller.may_cluster(Op.CREATE):
        verdict = _topics(Op.CREATE, "topics", "topics", "name", lambda t: {
            "name": t.name, "error_code": TOPIC_DENIED,
            "error_message": "Authorization failed.", "topic_config_error_code": TOPIC_DENIED,
            "num_partitions": -1, "replication_factor": -1, "configs": None})(
            caller, header, req, ctx)
    hidden = {t.name for t in req.topics if not caller.may(Op.DESCRIBE_CONFIGS, RT.TOPIC, t.name)}
    if not hidden:
        return verdict

    def hide_configs(resp: WireResponse) -> WireResponse:
        return {**resp, "topics": [
            {**t, "topic_config_error_code": TOPIC_DENIED, "num_partitions": -1,
             "replication_factor": -1, "configs": None} if t.get("name") in hidden else t
            for t in resp.get("topics", ())]}
    if verdict is None:
        return Verdict(request=req, finish=hide_configs)
    return dataclasses.replace(verdict, finish=_then(verdict.finish, hide_configs))


def _delete_topics(caller: Caller, header: RequestHeader, req: WireRequest,
                   ctx: HandlerContext) -> Verdict | None:
    if header.api_version < 6:
        kept, refused = _split(req.topic_names,
                               lambda n: caller.may(Op.DELETE, RT.TOPIC, n))
        if not refused:
            return None
        return _narrow(req, "topic_names", kept, _add("responses", [
            {"name": n, "error_code": TOPIC_DENIED} for n in refused]))
    by_id = {m.topic_id: n for n, m in ctx.controller.topics().items()}

    def allowed(t: WireRequest) -> bool:
        """By id: Describe too (else the name stays hidden), as Kafka."""
        if t.name is not None:
            return caller.may(Op.DELETE, RT.TOPIC, t.name)
        name = by_id.get(t.topic_id)
        return name is None or (caller.may(Op.DESCRIBE, RT.TOPIC, name)
                                and caller.may(Op.DELETE, RT.TOPIC, name))
    kept, refused = _split(req.topics, allowed)
    if not refused:
        return None
    return _narrow(req, "topics", kept, _add("responses", [
        {"name": t.name, "topic_id": t.topic_id, "error_code": TOPIC_DENIED,
         "error_message": "Authorization failed."} for t in refused]))


_CONFIG_RESOURCE_TOPIC = 2
_CONFIG_RESOURCE_GROUP = 32
_CONFIG_RESOURCE_KINDS = {_CONFIG_RESOURCE_TOPIC: (RT.TOPIC, TOPIC_DENIED),
                          _CONFIG_RESOURCE_GROUP: (RT.GROUP, GROUP_DENIED)}
"""Config resources checked on themselves; the others (BROKER 4, BROKER_LOGGER 8,
CLIENT_METRICS 16) on the cluster (CLUSTER_AUTHORIZATION_FAILED)."""


def _configs(op: AclOperation, response_field: str) -> Check:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: ``op`` on each topic (or
    group), on the cluster for a broker, broker logger or client metrics resource."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        def allowed(r: WireRequest) -> bool:
            kind = _CONFIG_RESOURCE_KINDS.get(int(r.resource_type))
            if kind is not None:
                return caller.may(op, kind[0], r.resource_name)
            return caller.may_cluster(op)
        kept, refused = _split(req.resources, allowed)
        if not refused:
            return None
        return _narrow(req, "resources", kept, _add(response_field, [
            {"error_code": _CONFIG_RESOURCE_KINDS.get(int(r.resource_type),
                                                      (RT.CLUSTER, CLUSTER_DENIED))[1],
             "error_message": "Authorization failed.",
             "resource_type": int(r.resource_type), "resource_name": r.resource_name,
             "configs": []} for r in refused]))
    return check


# -- groups -------------------------------------------------------------------------------------
def _offset_commit(caller: Caller, header: RequestHeader, req: WireRequest,
                   ctx: HandlerContext) -> Verdict | None:
    if not caller.may(Op.READ, RT.GROUP, req.group_id):
        return _refuse(topics=_per_partition("name", list(req.topics), GROUP_DENIED,
                                             "partition_index"))
    return _partition_topics(Op.READ)(caller, header, req, ctx)


def _txn_offset_commit(caller: Caller, header: RequestHeader, req: WireRequest,
                       ctx: HandlerContext) -> Verdict | None:
    for allowed, error in ((caller.may(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id),
                            TXN_DENIED),
                           (caller.may(Op.READ, RT.GROUP, req.group_id), GROUP_DENIED)):
        if not allowed:
            return _refuse(topics=_per_partition("name", list(req.topics), error,
                                                 "partition_index"))
    return _partition_topics(Op.READ)(caller, header, req, ctx)


def _offset_delete(caller: Caller, header: RequestHeader, req: WireRequest,
                   ctx: HandlerContext) -> Verdict | None:
    if not caller.may(Op.DELETE, RT.GROUP, req.group_id):
        return _refuse(error_code=GROUP_DENIED, topics=[])
    return _partition_topics(Op.READ)(caller, header, req, ctx)


def _offset_fetch_topics(caller: Caller, topics: Any) -> tuple[Any, list[WireResponse]]:
    """Requested topics the caller may Describe, and the answer for the others."""
    if topics is None:
        return None, []
    kept, refused = _split(topics, lambda t: caller.may(Op.DESCRIBE, RT.TOPIC, t.name))
    return tuple(kept), [{"name": t.name, "partitions": [
        {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": None, "error_code": TOPIC_DENIED} for i in t.partition_indexes]}
        for t in refused]


def _hide_topics(caller: Caller, topics: Iterable[WireResponse]) -> list[WireResponse]:
    return [t for t in topics if caller.may(Op.DESCRIBE, RT.TOPIC, t["name"])]


def _offset_fetch(caller: Caller, header: RequestHeader, req: WireRequest,
                  ctx: HandlerContext) -> Verdict | None:
    """Describe on the group (GROUP_AUTHORIZATION_FAILED), Describe on each topic asked for
    (TOPIC_AUTHORIZATION_FAILED); all of a group's topics: only those it may Describe."""
    if header.api_version < 8:
        if not caller.may(Op.DESCRIBE, RT.GROUP, req.group_id):
            return _refuse(error_code=GROUP_DENIED, topics=[
                {"name": t.name, "partitions": [
                    {"partition_index": i, "committed_offset": -1, "metadata": None,
                     "error_code": GROUP_DENIED} for i in t.partition_indexes]}
                for t in req.topics or ()])
        kept, extra = _offset_fetch_topics(caller, req.topics)

        def finish(resp: WireResponse) -> WireResponse:
            return {**resp, "topics": [*_hide_topics(caller, resp.get("topics", ())), *extra]}
        return Verdict(request=dataclasses.replace(req, topics=kept), finish=finish)
    groups = []
    refused_groups: dict[str, list[WireResponse]] = {}
    denied_groups: list[WireResponse] = []
    for g in req.groups:
        if not caller.may(Op.DESCRIBE, RT.GROUP, g.group_id):
            denied_groups.append({"group_id": g.group_id, "topics": [],
                                  "error_code": GROUP_DENIED})
            continue
        kept, extra = _offset_fetch_topics(caller, g.topics)
        refused_groups[g.group_id] = extra
        groups.append(dataclasses.replace(g, topics=kept))

    def finish_groups(resp: WireResponse) -> WireResponse:
        out = [{**g, "topics": [*_hide_topics(caller, g.get("topics", ())),
                                *refused_groups.get(g["group_id"], [])]}
               for g in resp.get("groups", ())]
        return {**resp, "groups": [*out, *denied_groups]}
    return Verdict(request=dataclasses.replace(req, groups=tuple(groups)), finish=finish_groups)


def _find_coordinator(caller: Caller, header: RequestHeader, req: WireRequest,
                      ctx: HandlerContext) -> Verdict | None:
    """Describe on the group (key type 0) or on the transactional id (key type 1);
    ClusterAction on the cluster for a share partition's coordinator (key type 2, KIP-932:
    asked by brokers only)."""
    key_type = int(getattr(req, "key_type", 0))
    txn = key_type == 1
    rt, error = (RT.TRANSACTIONAL_ID, TXN_DENIED) if txn else (RT.GROUP, GROUP_DENIED)
    if key_type == 2:
        error = CLUSTER_DENIED

    def may(key: str) -> bool:
        if key_type == 2:
            return caller.may_cluster(Op.CLUSTER_ACTION)
        return caller.may(Op.DESCRIBE, rt, key)

    if header.api_version < 4:
        if may(req.key):
            return None
        return _refuse(error_code=error, error_message=None, node_id=-1, host="", port=-1)
    kept, refused = _split(req.coordinator_keys, may)
    if not refused:
        return None
    return _narrow(req, "coordinator_keys", kept, _add("coordinators", [
        {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": error,
         "error_message": None} for k in refused]))


def _describe_groups(caller: Caller, header: RequestHeader, req: WireRequest,
                     ctx: HandlerContext) -> Verdict | None:
    kept, refused = _split(req.groups, lambda g: caller.may(Op.DESCRIBE, RT.GROUP, g))
    with_ops = bool(getattr(req, "include_authorized_operations", False))

    def finish(resp: WireResponse) -> WireResponse:
        groups = [{**g, "authorized_operations": caller.operations(RT.GROUP, g["group_id"])}
                  if with_ops else g for g in resp.get("groups", ())]
        return {**resp, "groups": [*groups, *({
            "group_id": g, "error_code": GROUP_DENIED, "group_state": "", "protocol_type": "",
            "protocol_data": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED} for g in refused)]}
    if not refused and not with_ops:
        return None
    return Verdict(request=dataclasses.replace(req, groups=tuple(kept)), finish=finish)


def _consumer_group_heartbeat(caller: Caller, header: RequestHeader, req: WireRequest,
                              ctx: HandlerContext) -> Verdict | None:
    """Read on the group, and Describe on every topic it subscribes to (Kafka's check)."""
    if not caller.may(Op.READ, RT.GROUP, req.group_id):
        return _refuse(error_code=GROUP_DENIED, member_epoch=int(req.member_epoch))
    for topic in req.subscribed_topic_names or ():
        if not caller.may(Op.DESCRIBE, RT.TOPIC, topic):
            return _refuse(error_code=TOPIC_DENIED, member_epoch=int(req.member_epoch))
    return None


def _consumer_group_describe(caller: Caller, header: RequestHeader, req: WireRequest,
                             ctx: HandlerContext) -> Verdict | None:
    kept, refused = _split(req.group_ids, lambda g: caller.may(Op.DESCRIBE, RT.GROUP, g))
    if not refused:
        return None

    def finish(resp: WireResponse) -> WireResponse:
        return {**resp, "groups": [*resp.get("groups", ()), *({
            "group_id": g, "error_code": GROUP_DENIED, "group_state": "", "group_epoch": -1,
            "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED} for g in refused)]}
    return Verdict(request=dataclasses.replace(req, group_ids=tuple(kept)), finish=finish)


# -- share groups (KIP-932) -------------------------------------------------------------------
def _share_records(api: ApiKey) -> Check:
    """ShareFetch, ShareAcknowledge: Read on the group (else the whole request is
    GROUP_AUTHORIZATION_FAILED), Read on each topic (else its partitions answer
    TOPIC_AUTHORIZATION_FAILED). The table's handler (its module loaded at the first such
    request), given who may read what."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        if not caller.may(Op.READ, RT.GROUP, req.group_id or ""):
            return _refuse(error_code=GROUP_DENIED, responses=[], node_endpoints=[])

        def denied(name: str) -> ErrorCode | None:
            return None if caller.may(Op.READ, RT.TOPIC, name) else \
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
        handler = cast(Callable[..., HandlerResult], HANDLERS[api])
        gated: Handler = functools.partial(handler, denied=denied)
        return Verdict(handler=gated)
    return check


def _describe_share_group_offsets(caller: Caller, header: RequestHeader, req: WireRequest,
                                  ctx: HandlerContext) -> Verdict | None:
    """Describe on each group (else that group answers GROUP_AUTHORIZATION_FAILED) and on each
    topic named (else the whole group's answer is TOPIC_AUTHORIZATION_FAILED)."""
    def allowed(g: WireRequest) -> bool:
        return caller.may(Op.DESCRIBE, RT.GROUP, g.group_id) and all(
            caller.may(Op.DESCRIBE, RT.TOPIC, t.topic_name) for t in g.topics or ())
    kept, refused = _split(req.groups, allowed)
    if not refused:
        return None

    def finish(resp: WireResponse) -> WireResponse:
        return {**resp, "groups": [*resp.get("groups", ()), *({
            "group_id": g.group_id, "topics": [],
            "error_code": GROUP_DENIED if not caller.may(Op.DESCRIBE, RT.GROUP, g.group_id)
            else TOPIC_DENIED} for g in refused)]}
    return Verdict(request=dataclasses.replace(req, groups=tuple(kept)), finish=finish)


def _share_group_offsets_change(group_op: AclOperation) -> Check:
    """Alter (Read on the group) and Delete (Delete on the group) ShareGroupOffsets; Read on
    each topic, else the request is TOPIC_AUTHORIZATION_FAILED."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        if not caller.may(group_op, RT.GROUP, req.group_id):
            return _refuse(error_code=GROUP_DENIED, responses=[])
        if not all(caller.may(Op.READ, RT.TOPIC, t.topic_name) for t in req.topics):
            return _refuse(error_code=TOPIC_DENIED, responses=[])
        return None
    return check


def _list_groups(caller: Caller, header: RequestHeader, req: WireRequest,
                 ctx: HandlerContext) -> Verdict | None:
    """Describe on the cluster lists every group; else only the groups it may Describe."""
    if caller.may_cluster(Op.DESCRIBE):
        return None
    return Verdict(request=req, finish=lambda r: {**r, "groups": [
        g for g in r.get("groups", ()) if caller.may(Op.DESCRIBE, RT.GROUP, g["group_id"])]})


def _delete_groups(caller: Caller, header: RequestHeader, req: WireRequest,
                   ctx: HandlerContext) -> Verdict | None:
    kept, refused = _split(req.groups_names, lambda g: caller.may(Op.DELETE, RT.GROUP, g))
    if not refused:
        return None
    return _narrow(req, "groups_names", kept, _add("results", [
        {"group_id": g, "error_code": GROUP_DENIED} for g in refused]))


# -- transactions -------------------------------------------------------------------------------
def _init_producer_id(caller: Caller, header: RequestHeader, req: WireRequest,
                      ctx: HandlerContext) -> Verdict | None:
    """Write on the TransactionalId; an idempotent producer (no transactional id):
    IdempotentWrite on the cluster or Write on at least one topic (KIP-679)."""
    if req.transactional_id is not None:
        if caller.may(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
            return None
        return _refuse(error_code=TXN_DENIED, producer_id=-1, producer_epoch=-1)
    if caller.may_cluster(Op.IDEMPOTENT_WRITE) or caller.may_any(Op.WRITE, RT.TOPIC):
        return None
    return _refuse(error_code=CLUSTER_DENIED, producer_id=-1, producer_epoch=-1)


def _txn_write(caller: Caller, header: RequestHeader, req: WireRequest,
               ctx: HandlerContext) -> Verdict | None:
    if caller.may(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        return None
    return _refuse(error_code=TXN_DENIED)


def _add_offsets_to_txn(caller: Caller, header: RequestHeader, req: WireRequest,
                        ctx: HandlerContext) -> Verdict | None:
    if not caller.may(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        return _refuse(error_code=TXN_DENIED)
    if not caller.may(Op.READ, RT.GROUP, req.group_id):
        return _refuse(error_code=GROUP_DENIED)
    return None


def _add_partitions_to_txn(caller: Caller, header: RequestHeader, req: WireRequest,
                           ctx: HandlerContext) -> Verdict | None:
    """v0-3 (clients): Write on the TransactionalId, Write on each topic; when any topic is
    refused nothing is added (the others answer OPERATION_NOT_ATTEMPTED). v4+ is sent by
    brokers (KIP-890): ClusterAction."""
    if header.api_version >= 4:
        return None if caller.may_cluster(Op.CLUSTER_ACTION) else _refuse(
            error_code=CLUSTER_DENIED, results_by_transaction=[])
    topics = list(req.v3_and_below_topics)

    def answer(error_of: Callable[[str], int]) -> Verdict:
        return _refuse(results_by_topic_v3_and_below=[
            {"name": t.name, "results_by_partition": [
                {"partition_index": int(i), "partition_error_code": error_of(t.name)}
                for i in t.partitions]} for t in topics])
    if not caller.may(Op.WRITE, RT.TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        return answer(lambda _n: TXN_DENIED)
    denied = {t.name for t in topics if not caller.may(Op.WRITE, RT.TOPIC, t.name)}
    if denied:
        return answer(lambda n: TOPIC_DENIED if n in denied
                      else int(ErrorCode.OPERATION_NOT_ATTEMPTED))
    return None


def _describe_transactions(caller: Caller, header: RequestHeader, req: WireRequest,
                           ctx: HandlerContext) -> Verdict | None:
    """Describe on each TransactionalId; a described transaction lists only the topics the
    caller may Describe (as Kafka)."""
    kept, refused = _split(req.transactional_ids,
                           lambda t: caller.may(Op.DESCRIBE, RT.TRANSACTIONAL_ID, t))

    def hide_topics(resp: WireResponse) -> WireResponse:
        return {**resp, "transaction_states": [
            {**s, "topics": [t for t in s.get("topics", ())
                             if caller.may(Op.DESCRIBE, RT.TOPIC, t["topic"])]}
            for s in resp.get("transaction_states", ())]}
    return _narrow(req, "transactional_ids", kept, _then(hide_topics, _add(
        "transaction_states", [
            {"transactional_id": t, "error_code": TXN_DENIED, "transaction_state": "",
             "transaction_timeout": 0, "transaction_start_time": _NO_START_TIME,
             "producer_id": -1, "producer_epoch": -1, "topics": []} for t in refused])))


def _list_transactions(caller: Caller, header: RequestHeader, req: WireRequest,
                       ctx: HandlerContext) -> Verdict | None:
    return Verdict(request=req, finish=lambda r: {**r, "transaction_states": [
        s for s in r.get("transaction_states", ())
        if caller.may(Op.DESCRIBE, RT.TRANSACTIONAL_ID, s["transactional_id"])]})


def _write_txn_markers(caller: Caller, header: RequestHeader, req: WireRequest,
                       ctx: HandlerContext) -> Verdict | None:
    """Alter or ClusterAction on the cluster (``KafkaApis`` tries Alter first)."""
    if caller.may_cluster(Op.ALTER) or caller.may_cluster(Op.CLUSTER_ACTION):
        return None
    return _refuse(markers=[{"producer_id": m.producer_id, "topics": [
        {"name": t.name, "partitions": [{"partition_index": int(i), "error_code": CLUSTER_DENIED}
                                        for i in t.partition_indexes]} for t in m.topics]}
        for m in req.markers])


def _share_state(**partition_fields: Any) -> Check:
    """The share coordinator's APIs (KIP-932): ClusterAction on the cluster, as Kafka; every
    partition refused CLUSTER_AUTHORIZATION_FAILED."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        if caller.may_cluster(Op.CLUSTER_ACTION):
            return None
        return _refuse(results=[{"topic_id": t.topic_id, "partitions": [
            {"partition": int(p.partition), "error_code": CLUSTER_DENIED,
             "error_message": None, **partition_fields} for p in t.partitions]}
            for t in req.topics])
    return check


# -- cluster operations with per-partition answers -------------------------------------------
def _elect_leaders(caller: Caller, header: RequestHeader, req: WireRequest,
                   ctx: HandlerContext) -> Verdict | None:
    if caller.may_cluster(Op.ALTER):
        return None
    return _refuse(error_code=CLUSTER_DENIED, replica_election_results=[
        {"topic": t.topic, "partition_result": [
            {"partition_id": int(p), "error_code": CLUSTER_DENIED, "error_message": None}
            for p in t.partitions]} for t in req.topic_partitions or ()])


def _alter_reassignments(caller: Caller, header: RequestHeader, req: WireRequest,
                         ctx: HandlerContext) -> Verdict | None:
    if caller.may_cluster(Op.ALTER):
        return None
    return _refuse(error_code=CLUSTER_DENIED, error_message=None, responses=[])


def _acl_apis(op: AclOperation, results_field: str, entry: WireResponse,
              items_field: str) -> Check:
    """CreateAcls / DeleteAcls: Alter on the cluster; DescribeAcls: Describe."""
    def check(caller: Caller, header: RequestHeader, req: WireRequest,
              ctx: HandlerContext) -> Verdict | None:
        if caller.may_cluster(op):
            return None
        return _refuse(**{results_field: [dict(entry) for _ in getattr(req, items_field)]})
    return check


def _none(caller: Caller, header: RequestHeader, req: WireRequest,
          ctx: HandlerContext) -> Verdict | None:
    return None


def _alter_scram(caller: Caller, header: RequestHeader, req: WireRequest,
                 ctx: HandlerContext) -> Verdict | None:
    """AlterUserScramCredentials: Alter on the cluster, else every user named refused."""
    if caller.may_cluster(Op.ALTER):
        return None
    users = dict.fromkeys([str(d.name) for d in req.deletions or ()]
                          + [str(u.name) for u in req.upsertions or ()])
    return _refuse(results=[{"user": u, "error_code": CLUSTER_DENIED,
                             "error_message": "Authorization failed."} for u in users])


def _create_delegation_token(caller: Caller, header: RequestHeader, req: WireRequest,
                             ctx: HandlerContext) -> Verdict | None:
    """A token for another owner (v3) takes CreateTokens on that user (``User:name``), else
    DELEGATION_TOKEN_AUTHORIZATION_FAILED; the caller's own needs nothing (Kafka)."""
    me = KafkaPrincipal(caller.principal.principal_type, caller.principal.name)
    owner = owner_of(req, me)
    if owner == me or caller.may(Op.CREATE_TOKENS, RT.USER, str(owner)):
        return None
    return Verdict(refused=refused(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, me))


def _describe_delegation_token(caller: Caller, header: RequestHeader, req: WireRequest,
                               ctx: HandlerContext) -> Verdict | None:
    """Each token answered only if the caller owns or renews it, or may Describe the token or
    DescribeTokens its owner (Kafka's ``filterToken``)."""
    me = KafkaPrincipal(caller.principal.principal_type, caller.principal.name)

    def visible(t: WireResponse) -> bool:
        owner = KafkaPrincipal(t["principal_type"], t["principal_name"])
        renewers = [KafkaPrincipal(r["principal_type"], r["principal_name"])
                    for r in t["renewers"]]
        return (me == owner or me in renewers
                or caller.may(Op.DESCRIBE, RT.DELEGATION_TOKEN, t["token_id"])
                or caller.may(Op.DESCRIBE_TOKENS, RT.USER, str(owner)))
    return Verdict(request=req, finish=lambda r: {
        **r, "tokens": [t for t in r.get("tokens", ()) if visible(t)]})


def _alter_replica_log_dirs(caller: Caller, header: RequestHeader, req: WireRequest,
                            ctx: HandlerContext) -> Verdict | None:
    """Alter on the cluster, else every partition asked about answers
    CLUSTER_AUTHORIZATION_FAILED (Kafka's ``handleAlterReplicaLogDirsRequest``)."""
    if caller.may_cluster(Op.ALTER):
        return None
    by_topic: dict[str, list[dict[str, int]]] = {}
    for entry in req.dirs:
        for topic in entry.topics:
            by_topic.setdefault(str(topic.name), []).extend(
                {"partition_index": int(p), "error_code": CLUSTER_DENIED}
                for p in topic.partitions)
    return _refuse(results=[{"topic_name": name, "partitions": parts}
                            for name, parts in by_topic.items()])


CHECKS: dict[ApiKey, Check] = {
    ApiKey.API_VERSIONS: _none,
    ApiKey.METADATA: _metadata,
    # Produce goes by ``produce_gate`` (its raw path never decodes through kio).
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _partition_topics(Op.DESCRIBE, timestamp=-1, offset=-1,
                                           leader_epoch=-1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: _partition_topics(Op.DELETE, low_watermark=-1),
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _topics(Op.ALTER, "topics", "results", "name", lambda t: {
        "name": t.name, "error_code": TOPIC_DENIED, "error_message": "Authorization failed."}),
    ApiKey.DESCRIBE_CONFIGS: _configs(Op.DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: _configs(Op.ALTER_CONFIGS, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _configs(Op.ALTER_CONFIGS, "responses"),
    ApiKey.DESCRIBE_LOG_DIRS: _cluster(Op.DESCRIBE, error_code=CLUSTER_DENIED, results=[]),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _alter_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(Op.DESCRIBE, error_code=CLUSTER_DENIED,
                                                  error_message=None, topics=[]),
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.DESCRIBE_QUORUM: _cluster(Op.DESCRIBE, error_code=CLUSTER_DENIED, topics=[]),
    ApiKey.ADD_RAFT_VOTER: _cluster(Op.ALTER, error_code=CLUSTER_DENIED, error_message=None),
    ApiKey.REMOVE_RAFT_VOTER: _cluster(Op.ALTER, error_code=CLUSTER_DENIED,
                                       error_message=None),
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group(Op.READ),
    ApiKey.SYNC_GROUP: _group(Op.READ),
    ApiKey.HEARTBEAT: _group(Op.READ),
    ApiKey.LEAVE_GROUP: _group(Op.READ),
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.LIST_CONFIG_RESOURCES: _cluster(Op.DESCRIBE_CONFIGS, error_code=CLUSTER_DENIED,
                                           config_resources=[]),
    # Kafka checks a share group as a consumer group: the same rules, the same answer fields.
    ApiKey.SHARE_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.SHARE_FETCH: _share_records(ApiKey.SHARE_FETCH),
    ApiKey.SHARE_ACKNOWLEDGE: _share_records(ApiKey.SHARE_ACKNOWLEDGE),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _share_group_offsets_change(Op.READ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _share_group_offsets_change(Op.DELETE),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: _share_state(),
    ApiKey.READ_SHARE_GROUP_STATE: _share_state(state_epoch=0, start_offset=-1,
                                                state_batches=[]),
    ApiKey.WRITE_SHARE_GROUP_STATE: _share_state(),
    ApiKey.DELETE_SHARE_GROUP_STATE: _share_state(),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _share_state(state_epoch=0, leader_epoch=-1,
                                                        start_offset=-1),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _txn_write,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: _topics(Op.READ, "topics", "topics", "name", lambda t: {
        "name": t.name, "partitions": [
            {"partition_index": int(i), "error_code": TOPIC_DENIED,
             "error_message": "Topic authorization failed.", "active_producers": []}
            for i in t.partition_indexes]}),
    # SASL's exchange comes before any principal (the connection's authenticator admits it).
    ApiKey.SASL_HANDSHAKE: _none,
    ApiKey.SASL_AUTHENTICATE: _none,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(
        Op.DESCRIBE, error_code=CLUSTER_DENIED, error_message="Authorization failed.",
        results=[]),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
    # Delegation tokens (KIP-48): only the owner and renewers renew or expire a token (decided
    # by the controller's rules), so those two need no ACL, as in Kafka.
    ApiKey.CREATE_DELEGATION_TOKEN: _create_delegation_token,
    ApiKey.RENEW_DELEGATION_TOKEN: _none,
    ApiKey.EXPIRE_DELEGATION_TOKEN: _none,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: _describe_delegation_token,
    ApiKey.DESCRIBE_ACLS: _cluster(Op.DESCRIBE, error_code=CLUSTER_DENIED,
                                   error_message="Authorization failed.", resources=[]),
    ApiKey.CREATE_ACLS: _acl_apis(Op.ALTER, "results", {
        "error_code": CLUSTER_DENIED, "error_message": "Authorization failed."}, "creations"),
    ApiKey.DELETE_ACLS: _acl_apis(Op.ALTER, "filter_results", {
        "error_code": CLUSTER_DENIED, "error_message": "Authorization failed.",
        "matching_acls": []}, "filters"),
    # Client quotas: DescribeConfigs / AlterConfigs on the cluster, as in Kafka.
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(Op.DESCRIBE_CONFIGS, error_code=CLUSTER_DENIED,
                                            error_message="Authorization failed.",
                                            entries=None),
    ApiKey.UNREGISTER_BROKER: _cluster(Op.ALTER, error_code=CLUSTER_DENIED, error_message=None),
    # Feature levels: Alter on the cluster, as in Kafka.
    ApiKey.UPDATE_FEATURES: lambda caller, header, req, ctx: None
    if caller.may_cluster(Op.ALTER) else _refuse(
        error_code=CLUSTER_DENIED, error_message="Authorization failed.",
        **({"results": [{"feature": u.feature, "error_code": CLUSTER_DENIED,
                         "error_message": "Authorization failed."}
                        for u in req.feature_updates]} if header.api_version < 2 else {})),
    ApiKey.ALTER_CLIENT_QUOTAS: lambda caller, header, req, ctx: None
    if caller.may_cluster(Op.ALTER_CONFIGS) else _refuse(entries=[
        {"error_code": CLUSTER_DENIED, "error_message": "Authorization failed.",
         "entity": [{"entity_type": d.entity_type, "entity_name": d.entity_name}
                    for d in e.entity]} for e in req.entries]),
}
assert set(CHECKS) | {ApiKey.PRODUCE} == SERVED, (
    "every API served has its authorization check")
