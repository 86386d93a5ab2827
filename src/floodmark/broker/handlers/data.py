"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from floodmark.broker.boundary import (
    ClientConnection,
    Encoded,
    HandlerResult,
    WireRequest,
    WireResponse,
)
from floodmark.broker.fetch_sessions import (
    ContextKind,
    FetchContext,
    ReadPlan,
    session_context,
)
from floodmark.broker.fetch_sessions import topic_key as _topic_key
from floodmark.broker.sendfile import LAZY_MIN_BYTES, SendfileParts
from floodmark.broker.setting_keys import (
    REPLICA_SELECTOR_CLASS,
    TRANSACTION_PARTITION_VERIFICATION_ENABLE,
)
from floodmark.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, READ_COMMITTED
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication import (
    Append,
    Ask,
    FetchIsolation,
    ReplicaSelection,
    Step,
    VerificationGuard,
    lacks_transactional_id,
    produce_as_leader,
    read_for_fetch,
)
from floodmark.storage import FileSlice
from floodmark.wire import (
    ApiKey,
    FetchPartitionResult,
    FetchTopicKey,
    HotDecodeError,
    NodeEndpoint,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceTopicKey,
    ProtocolError,
    RequestHeader,
    encode_fetch_response,
    encode_produce_response,
    ms,
    parse_produce_request,
)

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext
    from floodmark.broker.partition_state import PartitionState

log = logging.getLogger(__name__)

EARLIEST_LOCAL = -4  # KIP-405: no tiered storage here, so the log start offset
LATEST_TIERED = -5  # KIP-1005: nothing is tiered, so no offset (-1)
# The first ListOffsets version that may ask for each special timestamp; an older version, or a
# spec no served version defines (-6, KIP-1023's earliest pending upload, and below), is
# answered UNSUPPORTED_VERSION, as Kafka does.
_SPEC_MIN_VERSION = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8,
                     LATEST_TIERED: 9}


# -- Produce ---------------------------------------------------------------------------------------
# Answers a client is expected to meet in normal operation: not worth a warning line each.
_ROUTINE_REFUSALS = frozenset({ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                               ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                               ErrorCode.INVALID_PRODUCER_EPOCH})


# Kafka's FailedProduceRequestsPerSec counts unexpected failures only: not a partition this
# broker does not lead or know (yet), an oversized or corrupt batch, a failed log directory
# (ReplicaManager.appendToLocalLog marks the meter for everything else).
_EXPECTED_PRODUCE_ERRORS = frozenset({None, ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                      ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})


_last_refusal_warning_ms: dict[tuple[str, ErrorCode], int] = {}


def _warn_refusal(ps: PartitionState, error: ErrorCode, message: str | None, now_ms: int) -> None:
    """One line per partition and error per 10 s (a full disk refuses every produce)."""
    key = (ps.name, error)
    if now_ms - _last_refusal_warning_ms.get(key, -10_000) >= 10_000:
        _last_refusal_warning_ms[key] = now_ms
        log.warning("partition %s leader_epoch=%d refused produce: %s %s", ps.name,
                    ps.leader_epoch, error.name, message or "")


def append_partition(broker: HandlerContext, topic: str, partition: int, records: bytes | memoryview | None,
                     acks: int, now_ms: int, timeout_ms: int = 30_000, *,
                     verify_transactions: bool = False,
                     verification_guard: VerificationGuard | None = None
                     ) -> ProducePartitionResult:
    """One partition of a Produce request, through the one leader produce path
    (``replication.produce``): every acks=all answer, a duplicate's included, waits for the HW.
    ``verify_transactions`` / ``verification_guard``: KIP-890 part 1 (``_verify_then_produce``)."""
    out = ProducePartitionResult(partition, 0, -1, -1, -1)
    ps = broker.partitions.get((topic, partition))
    if ps is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    out.log_start_offset = ps.log_start_offset
    produce_id = broker.next_produce_id() if acks == -1 else -1
    topic_metrics = broker.topic_metrics
    end_before = ps.log_end_offset
    result = produce_as_leader(
        ps.core, ps.log, records, acks=acks, produce_id=produce_id,
        now_ms=now_ms, timeout_ms=timeout_ms, settings=broker.produce_settings(ps),
        leadership_in_doubt=broker.membership.leadership_in_doubt(),
        stepped_down=broker.membership.steps_down(ps.core, now_ms),
        verify_transactions=verify_transactions, verification_guard=verification_guard)
    if topic_metrics is not None:
        counts = topic_metrics.counts(topic)
        counts.total_produce += 1
        if result.appended and records is not None:
            counts.bytes_in += len(records)
            counts.messages_in += ps.log_end_offset - end_before
        elif result.answer not in _EXPECTED_PRODUCE_ERRORS:
            counts.failed_produce += 1
    if result.answer is not None and result.answer not in _ROUTINE_REFUSALS:
        _warn_refusal(ps, result.answer, result.error_message, now_ms)
    out.error_code = result.answer if result.answer is not None else ErrorCode.NONE
    out.error_message = result.error_message
    if result.record_errors:
        out.record_errors = result.record_errors
    if result.answer in (None, ErrorCode.NONE):
        out.base_offset = result.base_offset
        if result.log_append_time_ms >= 0:
            out.log_append_time_ms = result.log_append_time_ms
    ps.apply(result.effects)
    if result.parked:
        out.pending = broker.park_produce(produce_id)  # answered when the HW passes it
    return out


ProduceGate = Callable[[ProduceRequest], dict[tuple[str, int], ErrorCode]]
"""Authorization's answer for a Produce (``broker.authorization.produce_gate``): the partitions
refused, each with its error; nothing is appended to them."""
TopicGate = Callable[[str], ErrorCode | None]
"""Authorization's answer for a Fetch: a topic name -> the error to answer instead of reading
it, or None to read it."""


def produce_raw(broker: HandlerContext, frame: memoryview, version: int,
                gate: ProduceGate | None = None
                ) -> list[bytes | memoryview] | Awaitable[list[bytes | memoryview]] | None:
    """Produce straight from the frame: records are views into it (patched in place if the
    frame is writable), the response is packed by hand (wire/hot.py). ``gate``: the
    partitions authorization refuses (dispatch's check, when an authorizer is on)."""
    try:
        req = parse_produce_request(frame)
    except HotDecodeError as exc:
        raise ProtocolError(f"bad Produce v{version} request: {exc}") from exc
    req, unknown_ids = _resolve_topic_ids(broker, req)
    if lacks_transactional_id(req.transactional_id,
                              (p.records for _name, parts in req.topics for p in parts)):
        return _produce(broker, req, version, {
            (name, p.index): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            for name, parts in req.topics for p in parts})
    refused = {**(gate(req) if gate is not None else {}), **unknown_ids}
    if not _verifies(broker, req, version):
        return _produce(broker, req, version, refused)
    # KIP-890 and the producer's order (replication/txn_produce_gate.py): straight to the log
    # when nothing needs the coordinator and nothing of its producer is ahead; else the request
    # waits its turn and asks first.
    parts = {(name, p.index): p.records for name, parts in req.topics for p in parts}
    token, step = broker.txn_produces.arrive(
        parts, refused, supports_epoch_bump=version >= IMPLICIT_ADD_VERSION)
    if isinstance(step, Append):
        return _produce(broker, req, version, refused, verify=True)
    return _in_turn(_verify_then_produce(broker, req, version, refused, token, step),
                    lambda: broker.txn_produces.give_up(token))


def _in_turn(answer: Coroutine[object, object, list[bytes | memoryview]],
             release: Callable[[], None]) -> asyncio.Task[list[bytes | memoryview]]:
    """The answer of a request in the produce order, as a task that lets the next ones go
    however it ends: also when the connection closes and cancels it before it ever ran (its
    own ``finally`` then never runs, and every later request of its key would wait for good).
    ``release`` is idempotent."""
    task = asyncio.ensure_future(answer)
    task.add_done_callback(lambda _task: release())
    return task


def _resolve_topic_ids(broker: HandlerContext, req: ProduceRequest
                       ) -> tuple[ProduceRequest, dict[tuple[str, int], ErrorCode]]:
    """Produce v13+ (KIP-516) names its topics by id: each id becomes its topic's name. An id
    this broker does not know answers UNKNOWN_TOPIC_ID on each of its partitions, ahead of
    authorization, as Kafka's ``handleProduceRequest``; it stands under a name no topic can
    have (so nothing is appended or verified for it) and keeps its id in the answer."""
    if req.topic_ids is None:
        return req, {}
    names = topic_names_by_id(broker)
    topics: list[tuple[str, list[ProducePartition]]] = []
    unknown: dict[tuple[str, int], ErrorCode] = {}
    for topic_id, (_none, parts) in zip(req.topic_ids, req.topics, strict=True):
        name = names.get(topic_id)
        if name is None:
            name = f"<unknown topic id {topic_id}>"  # '<', ' ' are never in a topic name
            unknown.update({(name, p.index): ErrorCode.UNKNOWN_TOPIC_ID for p in parts})
        topics.append((name, parts))
    return dataclasses.replace(req, topics=topics), unknown


# Produce v12 (KIP-890 part 2, transaction version 2): the client sent no AddPartitionsToTxn;
# the leader adds the partition to the transaction before the first batch (always: without the
# add the coordinator would never write this partition's marker).
IMPLICIT_ADD_VERSION = 12


def _verifies(broker: HandlerContext, req: ProduceRequest, version: int) -> bool:
    """Does this Produce's transactional data go through KIP-890's verification (part 1:
    ``transaction.partition.verification.enable``) or implicit add (part 2: v12+)?"""
    return req.transactional_id is not None and (
        version >= IMPLICIT_ADD_VERSION
        or broker.config.value(TRANSACTION_PARTITION_VERIFICATION_ENABLE))


async def _verify_then_produce(broker: HandlerContext, req: ProduceRequest, version: int,
                               denied: dict[tuple[str, int], ErrorCode], token: int,
                               first: Step[int] | asyncio.Future[Step[int]]
                               ) -> list[bytes | memoryview]:
    """The gate's steps for one request (``first``: a future while it waits its turn): ask
    the coordinator (one question per producer and epoch; v12+ adds the partitions), then
    append with the guards, each partition the coordinator did not confirm refused."""
    txn_id = req.transactional_id
    assert txn_id is not None  # only a transactional Produce is verified
    produces = broker.txn_produces
    try:
        step = await first if isinstance(first, asyncio.Future) else first
        if isinstance(step, Ask):
            by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
            for tp, guard in step.guards.items():
                by_producer.setdefault((guard.producer_id, guard.producer_epoch),
                                       []).append(tp)
            errors: dict[tuple[str, int], ErrorCode] = {}
            add = version >= IMPLICIT_ADD_VERSION
            for (pid, epoch), partitions in by_producer.items():
                errors.update(await broker.transactions.verify(txn_id, pid, epoch, partitions,
                                                               add=add))
            answered = produces.answered(token, errors)
            assert answered is not None  # only this task gives its request up
            step = answered
        refused = {**denied, **{tp: error for tp, (error, _m) in step.refused.items()}}
        messages = {tp: message for tp, (_e, message) in step.refused.items()
                    if message is not None}
        answer = _produce(broker, req, version, refused, verify=True, guards=step.guards,
                          messages=messages)  # appends (or refuses) now
    finally:
        produces.give_up(token)  # the next request of this producer may append
    if answer is None:
        return []
    if isinstance(answer, list):
        return answer
    return await answer


def _produce(broker: HandlerContext, req: ProduceRequest, version: int,
             refused: dict[tuple[str, int], ErrorCode], *, verify: bool = False,
             guards: Mapping[tuple[str, int], VerificationGuard] | None = None,
             messages: dict[tuple[str, int], str] | None = None
             ) -> list[bytes | memoryview] | Awaitable[list[bytes | memoryview]] | None:
    acks = req.acks
    now_ms = broker.now_ms()
    timeout_ms = max(0, min(req.timeout_ms, 300_000))
    # A topic named twice in the request is one topic in the answer (first place, its
    # partitions in request order), as Kafka's answer, built from a map by topic.
    by_topic: dict[ProduceTopicKey, list[ProducePartitionResult]] = {}
    pending: list[ProducePartitionResult] = []
    guards = guards or {}
    messages = messages or {}
    keys: list[ProduceTopicKey] = (list(req.topic_ids) if req.topic_ids is not None
                                   else [name for name, _parts in req.topics])
    for key, (name, parts) in zip(keys, req.topics, strict=True):
        outs = [append_partition(broker, name, p.index, p.records, acks, now_ms, timeout_ms,
                                 verify_transactions=verify,
                                 verification_guard=guards.get((name, p.index)))
                if (name, p.index) not in refused
                else _refused(p.index, refused[(name, p.index)], messages.get((name, p.index)))
                for p in parts]
        pending.extend(o for o in outs if o.pending is not None)
        by_topic.setdefault(key, []).extend(outs)
    results = list(by_topic.items())
    if acks == 0:
        return None  # acks=0: no response at all (P4)
    if pending:
        return _await_produce(broker, version, req.correlation_id, results, pending)
    _count_produce_errors(broker, results)
    return [encode_produce_response(version, req.correlation_id, results)]


def _refused(partition: int, error: ErrorCode, message: str | None) -> ProducePartitionResult:
    out = ProducePartitionResult(partition, error, -1, -1, -1)
    out.error_message = message
    return out


async def _await_produce(broker: HandlerContext, version: int, correlation_id: int,
                         results: list[tuple[ProduceTopicKey, list[ProducePartitionResult]]],
                         pending: list[ProducePartitionResult]) -> list[bytes | memoryview]:
    for out in pending:
        assert out.pending is not None
        error, _base = await out.pending
        out.error_code = error
        if error is not ErrorCode.NONE:
            out.base_offset = -1
        out.pending = None
    _count_produce_errors(broker, results)
    return [encode_produce_response(version, correlation_id, results)]


def _count_produce_errors(broker: HandlerContext,
                          results: list[tuple[ProduceTopicKey, list[ProducePartitionResult]]]
                          ) -> None:
    """The answer's error codes, one per partition (Kafka's ErrorsPerSec for Produce)."""
    metrics = broker.request_metrics
    if metrics is not None:
        for _name, outs in results:
            for out in outs:
                metrics.count_error(ApiKey.PRODUCE, int(out.error_code))


# -- Fetch -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FetchSource:
    """Who fetches, as the read rule needs it: ``replica_id`` (-1 a consumer), ``leader_only``
    (Kafka's ``fetchOnlyLeader``: False for a consumer Fetch v11+, which a follower may serve,
    KIP-392) and ``selection`` (the consumer's rack and the brokers', when
    ``replica.selector.class`` is set and the consumer named its rack)."""

    replica_id: int = -1
    leader_only: bool = True
    selection: ReplicaSelection | None = None


def fetch_source(broker: HandlerContext, version: int, req: WireRequest, replica_id: int,
                 listener: str | None) -> FetchSource:
    """The read rule's view of one Fetch (``FetchSource``)."""
    if replica_id >= 0 or version < 11:
        return FetchSource(replica_id)
    rack = str(getattr(req, "rack_id", "") or "")
    selector = broker.config.value(REPLICA_SELECTOR_CLASS)
    if not rack or not selector:
        return FetchSource(replica_id, leader_only=False)
    racks = {int(b["node_id"]): b["rack"] for b in broker.live_brokers(listener)}
    return FetchSource(replica_id, False, ReplicaSelection(rack, racks, broker.now_ms()))


def _read_partition(ps: PartitionState | None, p: WireRequest, source: FetchSource,
                    budget: int, lazy: bool = False, isolation: int = 0, *,
                    stepped_down: bool = False, known: bool = False) -> FetchPartitionResult:
    """One partition of a Fetch that is not a follower's: the read rule is the replication
    layer's (``replication.reads``); this translates its answer to the wire. ``known``: the
    cluster's metadata has this partition (a broker not hosting it answers
    NOT_LEADER_OR_FOLLOWER then, as Kafka does, so a consumer sent to a replica that has just
    lost it goes back to the leader)."""
    index = int(p.partition)
    if ps is None:
        # Kafka answers an unknown partition with an empty (not null) aborted list
        return FetchPartitionResult(
            index, ErrorCode.NOT_LEADER_OR_FOLLOWER if known
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1, None, aborted_transactions=())
    read = read_for_fetch(
        ps.core, ps.log, int(p.fetch_offset), int(getattr(p, "current_leader_epoch", -1)),
        FetchIsolation.of(source.replica_id, isolation == READ_COMMITTED),
        min(int(p.partition_max_bytes), budget) if budget > 0 else None,
        lazy_min_bytes=LAZY_MIN_BYTES if lazy else None, stepped_down=stepped_down,
        leader_only=source.leader_only, selection=source.selection)
    bound = read.bound
    if read.error is not ErrorCode.NONE:
        return FetchPartitionResult(index, read.error, bound.high_watermark,
                                    bound.last_stable_offset, bound.log_start_offset, None)
    out = FetchPartitionResult(index, 0, bound.high_watermark, bound.last_stable_offset,
                               bound.log_start_offset, b"",
                               preferred_read_replica=bound.preferred_read_replica)
    if bound.preferred_read_replica >= 0 and log.isEnabledFor(logging.DEBUG):
        selection = source.selection
        log.debug("partition %s leader_epoch=%d: consumer in rack %s at offset %d sent to "
                  "replica %d", ps.name, ps.leader_epoch,
                  selection.client_rack if selection is not None else "-", int(p.fetch_offset),
                  bound.preferred_read_replica)
    if read.aborted is not None:
        out.aborted_transactions = tuple((a.producer_id, a.first_offset) for a in read.aborted)
    info = read.records
    if info is not None:
        # A lazy read of a large range: the file slice stands in for the bytes (sent by
        # sendfile; the wire encoder passes records through as one response part, which wire/
        # cannot name).
        if info.file_slice is not None:
            out.records = info.file_slice  # type: ignore[assignment]
        else:
            out.records = info.records
    return out


FetchTopics = list[tuple[FetchTopicKey, list[FetchPartitionResult]]]
# What one Fetch asks for: per topic, its key in the answer (name, or topic id from v13), its
# name (None: an unknown topic id) and the partitions' request entries.
FetchPlan = list[tuple[FetchTopicKey, str | None, list[WireRequest]]]

_names_by_id: tuple[object, dict[uuid.UUID, str]] = (None, {})


def topic_names_by_id(broker: HandlerContext) -> dict[uuid.UUID, str]:
    """topic id -> name, rebuilt only when the controller's topic view changes (it hands out the
    same dict object until then)."""
    global _names_by_id
    topics = broker.controller.topics()
    if _names_by_id[0] is not topics:
        _names_by_id = (topics, {m.topic_id: name for name, m in topics.items()})
    return _names_by_id[1]


def _resolve(broker: HandlerContext, read: ReadPlan, by_id: bool) -> FetchPlan:
    if not by_id:
        return [(key, str(key), parts) for key, parts in read]
    names = topic_names_by_id(broker)
    return [(key, names.get(key) if isinstance(key, uuid.UUID) else None, parts)
            for key, parts in read]


def _fetch_once(broker: HandlerContext, plan: FetchPlan, budget: int, source: FetchSource,
                lazy: bool = False, isolation: int = 0, denied: TopicGate | None = None
                ) -> tuple[FetchTopics, int, bool]:
    """Read every partition once: the answer's topics, the record bytes read, and whether the
    answer must go now (an error, or a consumer sent to another replica: Kafka answers those
    at once rather than parking the Fetch)."""
    total = 0
    errors = False
    topics: FetchTopics = []
    now = broker.now_ms()
    for key, name, partitions in plan:
        parts = []
        refusal = denied(name) if denied is not None and name is not None else None
        for p in partitions:
            if name is None or refusal is not None:
                # KIP-516: a topic id this broker does not know; or one not authorized
                parts.append(FetchPartitionResult(
                    int(p.partition), refusal or ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, None))
                errors = True
                continue
            ps = broker.partitions.get((name, int(p.partition)))
            # KIP-74: the first partition with data may exceed max_bytes by one whole batch.
            out = _read_partition(ps, p, source, budget - total if total else max(budget, 1),
                                  lazy, isolation, stepped_down=ps is not None
                                  and broker.membership.steps_down(ps.core, now),
                                  known=ps is None and _known(broker, name, int(p.partition)))
            n = len(out.records) if out.records else 0
            total += n
            errors = errors or out.error_code != 0 or out.preferred_read_replica >= 0
            parts.append(out)
        topics.append((key, parts))
    return topics, total, errors


def _known(broker: HandlerContext, topic: str, partition: int) -> bool:
    """Does the cluster's metadata have this partition (hosted here or not)?"""
    meta = broker.controller.topics().get(topic)
    return meta is not None and 0 <= partition < len(meta.partitions)


_LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def _leader_hints(broker: HandlerContext, plan: FetchPlan, topics: FetchTopics,
                  listener: str | None) -> list[NodeEndpoint]:
    """KIP-951 (v16+): a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    names its current leader and epoch, and the answer lists where those leaders listen, so
    the client moves there without waiting for a Metadata round trip. Only errored partitions
    cost anything."""
    metas = broker.controller.topics()
    leaders: set[int] = set()
    for (_, name, _), (_, parts) in zip(plan, topics, strict=True):
        meta = metas.get(name) if name is not None else None
        if meta is None:
            continue
        for p in parts:
            if p.error_code in _LEADER_HINT_ERRORS and p.partition_index < len(meta.partitions):
                pmeta = meta.partitions[p.partition_index]
                # A NOT_LEADER_OR_FOLLOWER from the broker the metadata names as leader: it
                # stepped down (replication.lease), so it does not name itself. A fenced
                # epoch at the leader names it with its current epoch (KIP-951).
                stepped_down = (p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                                and pmeta.leader == broker.node_id)
                if pmeta.leader >= 0 and not stepped_down:
                    p.current_leader = (pmeta.leader, pmeta.leader_epoch)
                    leaders.add(pmeta.leader)
    return [NodeEndpoint(b["node_id"], b["host"], b["port"], b["rack"])
            for b in broker.live_brokers(listener) if b["node_id"] in leaders]


def _count_fetch(broker: HandlerContext, plan: FetchPlan, topics: FetchTopics,
                 replica_id: int) -> None:
    """A Fetch answer in the metrics: its error codes (Kafka's ErrorsPerSec: the top-level one
    and each partition's), and per hosted topic the partitions read, failed and the record bytes
    sent (consumers: BytesOut; followers: ReplicationBytesOut, all topics)."""
    request_metrics = broker.request_metrics
    topic_metrics = broker.topic_metrics
    if request_metrics is not None:
        request_metrics.count_error(ApiKey.FETCH, 0)
    hosted = broker.partitions
    for (_, name, _), (_, parts) in zip(plan, topics, strict=True):
        for p in parts:
            code = int(p.error_code)
            if request_metrics is not None:
                request_metrics.count_error(ApiKey.FETCH, code)
            if topic_metrics is None or name is None or (name, p.partition_index) not in hosted:
                continue
            counts = topic_metrics.counts(name)
            counts.total_fetch += 1
            if code:
                counts.failed_fetch += 1
            elif p.records:
                if replica_id >= 0:
                    topic_metrics.replication_bytes_out += len(p.records)
                else:
                    counts.bytes_out += len(p.records)


def _encode_fetch(broker: HandlerContext, header: RequestHeader, plan: FetchPlan, topics: FetchTopics,
                  errors: bool, ctx: FetchContext | None, listener: str | None,
                  replica_id: int) -> Encoded:
    if broker.request_metrics is not None or broker.topic_metrics is not None:
        _count_fetch(broker, plan, topics, replica_id)
    # Hints first: they walk the plan beside the unfiltered answer (errored partitions are in
    # every answer, incremental ones included).
    endpoints = (_leader_hints(broker, plan, topics, listener)
                 if errors and header.api_version >= 16 else None)
    session_id = 0
    if ctx is not None:
        session_id, topics = ctx.finish(topics, broker.now_ms())
    parts = encode_fetch_response(header.api_version, header.correlation_id, topics,
                                  session_id=session_id, node_endpoints=endpoints)
    if any(isinstance(p.records, FileSlice) for _, plist in topics for p in plist):
        return SendfileParts(parts)
    return parts


def _close_slices(topics: FetchTopics) -> None:
    for _, plist in topics:
        for p in plist:
            if isinstance(p.records, FileSlice):
                p.records.close()


async def _fetch_delayed(broker: HandlerContext, header: RequestHeader, plan: FetchPlan, budget: int,
                         source: FetchSource, wait_ms: int, min_bytes: int, lazy: bool,
                         ctx: FetchContext | None, isolation: int,
                         denied: TopicGate | None, listener: str | None) -> Encoded:
    keys = [(name, int(p.partition)) for _, name, parts in plan if name is not None
            for p in parts]
    deadline = broker.now_ms() + wait_ms
    while True:
        remaining = deadline - broker.now_ms()
        if remaining <= 0:
            break
        await broker.purgatory.wait(keys, remaining)
        topics, total, errors = _fetch_once(broker, plan, budget, source, lazy, isolation,
                                            denied)
        if total >= min_bytes or errors:
            return _encode_fetch(broker, header, plan, topics, errors, ctx, listener,
                                 source.replica_id)
        _close_slices(topics)
    topics, _, errors = _fetch_once(broker, plan, budget, source, lazy, isolation, denied)
    return _encode_fetch(broker, header, plan, topics, errors, ctx, listener, source.replica_id)


def _session_context(broker: HandlerContext, req: WireRequest, by_id: bool, replica_id: int
                     ) -> FetchContext | None:
    return session_context(broker.fetch_sessions, req, by_id=by_id,
                           privileged=replica_id >= 0, now_ms=broker.now_ms())


def fetch(broker: HandlerContext, header: RequestHeader, req: WireRequest,
          conn: ClientConnection, denied: TopicGate | None = None) -> HandlerResult:
    """``denied``: the topics authorization refuses (dispatch's check, when an authorizer is
    on), answered with its error instead of being read."""
    version = header.api_version
    replica_id = int(getattr(req, "replica_id", -1))  # v15+: only replicas set replica_state
    # Records go out by sendfile only when the segment files hold them (not in the unsafe
    # page-cache mode, whose unsynced tail lives in memory).
    lazy = conn.sendfile_fd is not None and broker.storage.sendfile_capable
    by_id = version >= 13
    listener = conn.listener_name  # leader hints name the brokers' endpoints of this listener
    ctx = _session_context(broker, req, by_id, replica_id) if version >= 7 else None
    if ctx is None:
        read: ReadPlan = [(_topic_key(t, by_id), t.partitions) for t in req.topics]
    elif ctx.kind is ContextKind.ERROR:
        if broker.request_metrics is not None:
            broker.request_metrics.count_error(ApiKey.FETCH, int(ctx.error))
        return encode_fetch_response(version, header.correlation_id, [],
                                     error_code=int(ctx.error))
    else:
        read = ctx.plan
    plan = _resolve(broker, read, by_id)
    budget = int(getattr(req, "max_bytes", 0x7FFFFFFF))
    isolation = int(getattr(req, "isolation_level", 0))
    source = fetch_source(broker, version, req, replica_id, listener)
    topics, total, errors = _fetch_once(broker, plan, budget, source, lazy, isolation,
                                        denied)
    wait_ms = min(max(ms(req.max_wait), 0), 60_000)
    min_bytes = int(req.min_bytes)
    if wait_ms <= 0 or total >= min_bytes or errors or not topics:
        return _encode_fetch(broker, header, plan, topics, errors, ctx, listener, replica_id)
    _close_slices(topics)
    return _fetch_delayed(broker, header, plan, budget, source, wait_ms, min_bytes, lazy,
                          ctx, isolation, denied, listener)


# -- ListOffsets -----------------------------------------------------------------------------------
def _list_partition(broker: HandlerContext, ps: PartitionState | None, p: WireRequest,
                    isolation: int, replica_id: int = -1, version: int = 1) -> WireResponse:
    out: WireResponse = {"partition_index": int(p.partition_index), "error_code": 0,
                           "old_style_offsets": [], "timestamp": -1, "offset": -1,
                           "leader_epoch": -1}
    if ps is None:
        out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return out
    err = ps.check_leader_epoch(int(getattr(p, "current_leader_epoch", -1)))
    if err != ErrorCode.NONE:
        out["error_code"] = int(err)
        return out
    ts = int(p.timestamp)
    cache = ps.log.epoch_cache
    if ts < 0 and version < _SPEC_MIN_VERSION.get(ts, version + 1):
        out["error_code"] = int(ErrorCode.UNSUPPORTED_VERSION)
    elif ts == LATEST_TIERED:
        pass  # offset -1, leader epoch -1: no tiered segment exists
    elif ts == LATEST_TIMESTAMP and replica_id != -1:
        # Replicas and debug tools (replica_id != -1) see the log end, consumers the HW (§2.7).
        out["offset"] = ps.log_end_offset
        out["leader_epoch"] = ps.leader_epoch
    elif ts == LATEST_TIMESTAMP and not ps.core.offsets_available:
        out["error_code"] = int(ErrorCode.OFFSET_NOT_AVAILABLE)  # KIP-207: HW not caught up yet
    elif ts == LATEST_TIMESTAMP:
        # read_committed: the LSO (no record of an open transaction counts as written yet)
        out["offset"] = ps.last_stable_offset if isolation == READ_COMMITTED else ps.high_watermark
        out["leader_epoch"] = ps.leader_epoch
    elif ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL):
        out["offset"] = ps.log_start_offset
        out["leader_epoch"] = cache.epoch_for_offset(ps.log_start_offset)
    else:  # MAX_TIMESTAMP or a time (every other negative spec is refused above)
        found = ps.log.offset_for_timestamp(ts)
        # Kafka's lastFetchableOffset: the HW, the LSO for read_committed.
        fetchable = ps.last_stable_offset if isolation == READ_COMMITTED else ps.high_watermark
        if found is not None and found[0] < fetchable:
            out["offset"], out["timestamp"], out["leader_epoch"] = found
        elif not ps.core.offsets_available:
            # "No record at or after ts below the HW" could be wrong while the HW lags (KIP-207).
            out["error_code"] = int(ErrorCode.OFFSET_NOT_AVAILABLE)
    return out


def list_offsets(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                 conn: ClientConnection) -> HandlerResult:
    isolation = int(getattr(req, "isolation_level", 0))
    named = Counter((t.name, int(p.partition_index)) for t in req.topics for p in t.partitions)
    answered: set[tuple[str, int]] = set()
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            if named[tp] > 1:
                # A partition named twice: answered once, INVALID_REQUEST (as Kafka).
                if tp not in answered:
                    answered.add(tp)
                    parts.append({"partition_index": tp[1], "timestamp": -1, "offset": -1,
                                  "leader_epoch": -1, "old_style_offsets": [],
                                  "error_code": int(ErrorCode.INVALID_REQUEST)})
                continue
            parts.append(_list_partition(broker, broker.partitions.get(tp), p, isolation,
                                         int(req.replica_id), header.api_version))
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


# -- OffsetForLeaderEpoch ------------------------------------------------------------------------
def offset_for_leader_epoch(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection) -> HandlerResult:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out: WireResponse = {"error_code": 0, "partition": int(p.partition),
                                   "leader_epoch": -1, "end_offset": -1}
            ps = broker.partitions.get((t.topic, int(p.partition)))
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                err, answer = ps.end_offset_for_epoch(int(p.current_leader_epoch),
                                                      int(p.leader_epoch))
                out["error_code"] = int(err)
                if err == ErrorCode.NONE:
                    out["leader_epoch"] = answer.epoch
                    out["end_offset"] = answer.end_offset
            parts.append(out)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


# -- InitProducerId --------------------------------------------------------------------------------
def init_producer_id(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                     conn: ClientConnection) -> WireResponse | Awaitable[WireResponse]:
    """An idempotent producer's (no ``transactional.id``: those go to the transaction
    coordinator, ``txn_apis``)."""
    existing = int(getattr(req, "producer_id", -1))
    existing_epoch = int(getattr(req, "producer_epoch", -1))
    if existing >= 0 and 0 <= existing_epoch < 32766:
        # KIP-360: an idempotent producer may bump its own epoch to reset sequences.
        return {"throttle_time": 0, "error_code": 0, "producer_id": existing,
                "producer_epoch": existing_epoch + 1}
    return _new_producer_id(broker)


async def _new_producer_id(broker: HandlerContext) -> WireResponse:
    """A new id, from the block the controller handed this broker (awaited when a new block is
    needed: only this request waits for the controller)."""
    try:
        pid = await broker.controller.allocate_producer_id()
    except KafkaError as exc:  # no controller answered: the producer retries
        return {"throttle_time": 0, "error_code": int(exc.code), "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}


def low_watermark(broker: HandlerContext, ps: PartitionState, alive: set[int]) -> int:
    """Kafka's ``lowWatermarkIfLeader``: the smallest log start offset over this leader and every
    replica on a live broker (as each reported it in its last fetch; -1 before the first)."""
    low = ps.log_start_offset
    role = ps.core.role
    for replica in getattr(role, "replicas", ()):
        if replica == broker.node_id or replica not in alive:
            continue
        state = ps.core.replica_states.get(replica)
        low = min(low, state.log_start_offset if state is not None else -1)
    return low


def _delete_records_status(broker: HandlerContext, topic: str, out: WireResponse, required: int,
                           alive: set[int]) -> bool:
    """Is this partition's answer final? Sets its error and low watermark when it is."""
    ps = broker.partitions.get((topic, out["partition_index"]))
    if ps is None:
        out.update(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), low_watermark=-1)
        return True
    if not ps.core.is_leader:
        out.update(error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER), low_watermark=-1)
        return True
    low = low_watermark(broker, ps, alive)
    if low >= required:
        out.update(error_code=0, low_watermark=low)
        return True
    return False


def delete_records(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                   conn: ClientConnection | None = None
                   ) -> WireResponse | Awaitable[WireResponse]:
    """DeleteRecords: the leader moves its log start offset (the *low watermark*) up to the
    requested offset (-1: the HW); never past the HW. Followers follow it from the leader's
    fetch answers (``replication.driver``) and report theirs in their next fetch; the answer
    comes when every replica on a live broker has reached the offset (Kafka's delayed
    delete-records), or after the request's timeout with REQUEST_TIMED_OUT. Compacted-only
    topics refuse (POLICY_VIOLATION)."""
    topics = []
    pending: list[tuple[str, WireResponse, int]] = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            out: WireResponse = {"partition_index": index, "low_watermark": -1,
                                   "error_code": 0}
            ps = broker.partitions.get((t.name, index))
            if ps is None:
                out["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif not ps.core.is_leader:
                out["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif ps.log.config.compact and not ps.log.config.delete:
                out["error_code"] = int(ErrorCode.POLICY_VIOLATION)
            else:
                hw = ps.high_watermark
                offset = hw if int(p.offset) == -1 else int(p.offset)
                if not 0 <= offset <= hw:
                    out["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                else:
                    try:
                        if ps.driver.maybe_increment_log_start_offset(offset):
                            log.info("partition %s leader_epoch=%d DeleteRecords: log start "
                                     "offset now %d", ps.name, ps.leader_epoch, offset)
                    except KafkaError as exc:
                        out["error_code"] = int(exc.code)
                    else:
                        # Until every replica is there: REQUEST_TIMED_OUT, with the leader's
                        # own low watermark (what a timed-out answer says, as in Kafka).
                        out["low_watermark"] = ps.log_start_offset
                        pending.append((t.name, out, offset))
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    answer = {"throttle_time": 0, "topics": topics}
    alive = {int(b["node_id"]) for b in broker.live_brokers()}
    pending = [(topic, out, required) for topic, out, required in pending
               if not _delete_records_status(broker, topic, out, required, alive)]
    if not pending:
        return answer
    timeout_ms = min(max(ms(req.timeout), 0), 300_000)
    return _delete_records_delayed(broker, answer, pending, timeout_ms)


async def _delete_records_delayed(broker: HandlerContext, answer: WireResponse,
                                  pending: list[tuple[str, WireResponse, int]],
                                  timeout_ms: int) -> WireResponse:
    """Parked in the broker's purgatory on its partitions: a follower's fetch that reports a new
    log start offset wakes it (``replica_fetcher``), as does a leadership change."""
    deadline = broker.now_ms() + timeout_ms
    for _topic, out, _required in pending:
        out["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
    while pending:
        remaining = deadline - broker.now_ms()
        if remaining <= 0:
            break
        await broker.purgatory.wait([(topic, out["partition_index"]) for topic, out, _ in pending],
                                    remaining)
        alive = {int(b["node_id"]) for b in broker.live_brokers()}
        pending = [(topic, out, required) for topic, out, required in pending
                   if not _delete_records_status(broker, topic, out, required, alive)]
    return answer
