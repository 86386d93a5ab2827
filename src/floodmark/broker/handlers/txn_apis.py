"""The transaction coordinator's APIs (KIP-98): InitProducerId with a ``transactional.id``,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions; and
TxnOffsetCommit, which the *group* coordinator serves (the offsets stay pending until the
transaction's marker lands on the group's ``__consumer_offsets`` partition).

The decisions are the core's (``replication.transactions.coordinator``), carried out by its
driver (``replication.transactions.driver``) under the broker's ``txn_coordinator``; these
handlers only translate requests and answers, version by version. KIP-588: PRODUCER_FENCED is
answered as INVALID_PRODUCER_EPOCH to request versions older than the one that introduced it.
"""

from __future__ import annotations

import datetime
import logging
import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from floodmark.broker import group_routing
from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers import data, group_apis
from floodmark.broker.offsets import partition_for
from floodmark.errors import ErrorCode
from floodmark.metadata import OFFSETS_TOPIC, CoordinatorType
from floodmark.replication import TV_2, ListFilter, TxnPartition, TxnState
from floodmark.wire import RequestHeader, ms

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

log = logging.getLogger(__name__)

Answer = WireResponse


def _fenced_for(version: int, first_version: int, error: ErrorCode) -> ErrorCode:
    """KIP-588: versions before ``first_version`` know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if error is ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _txn_partition(ctx: HandlerContext, transactional_id: str) -> int:
    """The transactional id's ``__transaction_state`` partition; -1 while the topic is being
    created (asking the membership who coordinates it creates it on first use)."""
    p = ctx.transactions.txn_partition(transactional_id)
    if p < 0:
        ctx.membership.coordinator_for(transactional_id, CoordinatorType.TRANSACTION)
        p = ctx.transactions.txn_partition(transactional_id)
    return p


# -- InitProducerId ---------------------------------------------------------------------------------
def init_producer_id(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                     conn: ClientConnection) -> Answer | Awaitable[Answer]:
    txn_id = req.transactional_id
    if txn_id is None:
        return data.init_producer_id(ctx, header, req, conn)
    version = header.api_version
    p = _txn_partition(ctx, txn_id)
    timeout_ms = ms(req.transaction_timeout)
    expected_pid = int(getattr(req, "producer_id", -1))
    expected_epoch = int(getattr(req, "producer_epoch", -1))
    now = ctx.now_ms()
    core = ctx.transactions.core

    async def answer() -> Answer:
        reply = await ctx.transactions.run(lambda rid: core.init_producer_id(
            rid, p, txn_id, timeout_ms, now, expected_producer_id=expected_pid,
            expected_epoch=expected_epoch))
        error = _fenced_for(version, 4, reply.error)
        return {"throttle_time": 0, "error_code": int(error),
                "producer_id": reply.producer_id if error is ErrorCode.NONE else -1,
                "producer_epoch": reply.producer_epoch if error is ErrorCode.NONE else -1}

    return answer()


# -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------
def _partition_errors(ctx: HandlerContext, topics: list[tuple[str, list[int]]],
                      internal_ok: bool) -> dict[TxnPartition, ErrorCode]:
    """Partitions that do not exist (UNKNOWN_TOPIC_OR_PARTITION); internal topics cannot be
    added by a producer (INVALID_REQUEST; AddOffsetsToTxn adds ``__consumer_offsets``), but
    may be verified (``internal_ok``)."""
    metas = ctx.controller.topics()
    out: dict[TxnPartition, ErrorCode] = {}
    for name, partitions in topics:
        meta = metas.get(name)
        for p in partitions:
            if meta is None or not 0 <= p < len(meta.partitions):
                out[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif meta.internal and not internal_ok:
                out[(name, p)] = ErrorCode.INVALID_REQUEST
    return out


async def _add_partitions(ctx: HandlerContext, version: int, txn_id: str, producer_id: int,
                          producer_epoch: int, topics: list[tuple[str, list[int]]],
                          verify_only: bool) -> dict[TxnPartition, ErrorCode]:
    wanted = [(t, p) for t, ps in topics for p in ps]
    # v4+ come from brokers, which add a group's __consumer_offsets partition themselves
    # (TxnOffsetCommit v5, KIP-890 part 2); a client (v3 and below) may not name one.
    bad = _partition_errors(ctx, topics, internal_ok=verify_only or version >= 4)
    if bad:  # Kafka: nothing is added, the others are OPERATION_NOT_ATTEMPTED
        return {tp: bad.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    p = _txn_partition(ctx, txn_id)
    core = ctx.transactions.core
    if verify_only:
        return core.verify_partitions(p, txn_id, producer_id, producer_epoch, wanted)
    now = ctx.now_ms()
    reply = await ctx.transactions.run(lambda rid: core.add_partitions(
        rid, p, txn_id, producer_id, producer_epoch, wanted, now))
    return dict.fromkeys(wanted, _fenced_for(version, 2, reply.error))


def _topic_results(topics: list[tuple[str, list[int]]], errors: dict[TxnPartition, ErrorCode],
                   ) -> list[Answer]:
    return [{"name": name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": int(errors[(name, p)])}
        for p in partitions]} for name, partitions in topics]


def add_partitions_to_txn(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                          conn: ClientConnection) -> Awaitable[Answer]:
    version = header.api_version

    async def answer() -> Answer:
        if version <= 3:
            topics = [(str(t.name), [int(p) for p in t.partitions])
                      for t in req.v3_and_below_topics]
            errors = await _add_partitions(ctx, version, req.v3_and_below_transactional_id,
                                           int(req.v3_and_below_producer_id),
                                           int(req.v3_and_below_producer_epoch), topics, False)
            return {"throttle_time": 0,
                    "results_by_topic_v3_and_below": _topic_results(topics, errors)}
        # v4+ (KIP-890): a batch of transactions, each maybe only verified.
        results = []
        for txn in req.transactions:
            topics = [(str(t.name), [int(p) for p in t.partitions]) for t in txn.topics]
            errors = await _add_partitions(ctx, version, txn.transactional_id,
                                           int(txn.producer_id), int(txn.producer_epoch),
                                           topics, bool(txn.verify_only))
            results.append({"transactional_id": txn.transactional_id,
                            "topic_results": _topic_results(topics, errors)})
        return {"throttle_time": 0, "error_code": 0, "results_by_transaction": results}

    return answer()


def add_offsets_to_txn(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                       conn: ClientConnection) -> Awaitable[Answer]:
    """The group's ``__consumer_offsets`` partition joins the transaction (its marker makes
    the TxnOffsetCommit offsets committed or drops them)."""
    version = header.api_version

    async def answer() -> Answer:
        group = str(req.group_id)
        if ctx.membership.coordinator_for(group) < 0:  # creates the offsets topic if needed
            return {"throttle_time": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE)}
        meta = ctx.controller.topics().get(OFFSETS_TOPIC)
        if meta is None:
            return {"throttle_time": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE)}
        tp = (OFFSETS_TOPIC, partition_for(group, len(meta.partitions)))
        p = _txn_partition(ctx, req.transactional_id)
        core = ctx.transactions.core
        now = ctx.now_ms()
        reply = await ctx.transactions.run(lambda rid: core.add_partitions(
            rid, p, req.transactional_id, int(req.producer_id), int(req.producer_epoch), [tp],
            now))
        return {"throttle_time": 0, "error_code": int(_fenced_for(version, 2, reply.error))}

    return answer()


# -- EndTxn -----------------------------------------------------------------------------------------
END_TXN_V2_VERSION = 5
def end_txn(ctx: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> Awaitable[Answer]:
    version = header.api_version
    p = _txn_partition(ctx, req.transactional_id)
    core = ctx.transactions.core
    now = ctx.now_ms()

    # v5 (KIP-890 part 2): the client uses transaction version 2, so the epoch is bumped as the
    # transaction ends and the answer names the producer's new id and epoch.
    transaction_version = TV_2 if version >= END_TXN_V2_VERSION else 0

    async def answer() -> Answer:
        reply = await ctx.transactions.run(lambda rid: core.end_txn(
            rid, p, req.transactional_id, int(req.producer_id), int(req.producer_epoch),
            bool(req.committed), now, transaction_version=transaction_version))
        error = _fenced_for(version, 2, reply.error)
        out: Answer = {"throttle_time": 0, "error_code": int(error)}
        if version >= END_TXN_V2_VERSION:
            ok = error is ErrorCode.NONE
            out.update(producer_id=reply.producer_id if ok else -1,
                       producer_epoch=reply.producer_epoch if ok else -1)
        return out

    return answer()


# -- TxnOffsetCommit (the group coordinator's) --------------------------------------------------------
def _txn_commit_member_error(ctx: HandlerContext, req: WireRequest) -> ErrorCode:
    """Kafka's checks of a transactional commit's group fields (v3+, KIP-447): a fenced static
    member, an unknown member id, a stale generation; -1 and no member id skip them."""
    group = str(req.group_id)
    member_id = str(getattr(req, "member_id", "") or "")
    generation = int(getattr(req, "generation_id", -1))
    if group_routing.owner(ctx.consumer_groups, group) is group_routing.Core.CONSUMER and (
            member_id or generation >= 0):
        # KIP-848: the generation is the member epoch (Kafka's transactional commit check)
        return ctx.consumer_groups.validate_commit(group, member_id, generation,
                                                   api_version=0, transactional=True)
    if ctx.groups.fenced(group, member_id, getattr(req, "group_instance_id", None)):
        return ErrorCode.FENCED_INSTANCE_ID
    g = ctx.groups.groups.get(group)
    if member_id and (g is None or member_id not in g.members):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation >= 0 and g is not None and generation != g.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


# TxnOffsetCommit v5 (KIP-890 part 2): the client sent no AddOffsetsToTxn; the group
# coordinator adds the group's __consumer_offsets partition to the transaction first. What the
# transaction coordinator answers, as this API's client knows it: retriable trouble reaching it
# is COORDINATOR_LOAD_IN_PROGRESS (every client retries that at the same coordinator).
TXN_OFFSET_COMMIT_ADD_VERSION = 5
_ADD_REFUSALS = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: ErrorCode.INVALID_PRODUCER_ID_MAPPING,
}


def txn_offset_commit(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                      conn: ClientConnection) -> Awaitable[Answer]:
    """Offsets written in a transactional batch of the producer to the group's offsets
    partition, answered once replicated (acks=all); pending (OffsetFetch does not return them)
    until the transaction's marker. v5: the group's partition joins the transaction first."""
    group = str(req.group_id)
    producer = (int(req.producer_id), int(req.producer_epoch))
    member_error = _txn_commit_member_error(ctx, req)
    if header.api_version < TXN_OFFSET_COMMIT_ADD_VERSION or member_error is not ErrorCode.NONE:
        return group_apis.store_offsets(ctx, group, req.topics, member_error, producer)

    async def answer() -> Answer:
        error = ErrorCode.NONE
        meta = ctx.controller.topics().get(OFFSETS_TOPIC)
        if meta is None:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        else:
            tp = (OFFSETS_TOPIC, partition_for(group, len(meta.partitions)))
            added = await ctx.transactions.verify(str(req.transactional_id), *producer, [tp],
                                                  add=True)
            found = added.get(tp, ErrorCode.NOT_ENOUGH_REPLICAS)
            if found is not ErrorCode.NONE:
                error = _ADD_REFUSALS.get(found, ErrorCode.INVALID_TXN_STATE)
                log.info("TxnOffsetCommit v%d of group %s: %s-%d not added to the "
                         "transaction of %r: %s", header.api_version, group, tp[0], tp[1],
                         str(req.transactional_id)[:200], found.name)
        return await group_apis.store_offsets(ctx, group, req.topics, error, producer)

    return answer()


# -- DescribeTransactions / ListTransactions ----------------------------------------------------------
def _timestamp(value_ms: int) -> datetime.datetime:
    """An epoch-ms timestamp for a ``datetime_i64`` field; no transaction started is 0 (Kafka's
    default for an id it does not know; Kafka writes -1 for one without a transaction, which
    kio-based clients, floodmark's own included, cannot read)."""
    return datetime.datetime.fromtimestamp(max(value_ms, 0) / 1000, tz=datetime.UTC)


def describe_transactions(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                          conn: ClientConnection) -> Answer:
    out = []
    for txn_id in req.transactional_ids:
        p = ctx.transactions.txn_partition(txn_id)
        err, m = ctx.transactions.core.describe(p, txn_id)
        entry: Answer = {"error_code": int(err), "transactional_id": txn_id,
                         "transaction_state": "", "transaction_timeout": 0,
                         "transaction_start_time": _timestamp(-1), "producer_id": -1,
                         "producer_epoch": -1,
                         "topics": []}
        if m is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(m.partitions):
                by_topic.setdefault(topic, []).append(index)
            entry.update(transaction_state=m.state.kafka_name,
                         transaction_timeout=m.txn_timeout_ms,
                         transaction_start_time=_timestamp(m.txn_start_timestamp_ms),
                         producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                         topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        out.append(entry)
    return {"throttle_time": 0, "transaction_states": out}


def list_transactions(ctx: HandlerContext, header: RequestHeader, req: WireRequest, conn: ClientConnection) -> Answer:
    names = [str(s) for s in req.state_filters]
    states = {s: TxnState.from_kafka_name(s) for s in names}
    source = getattr(req, "transactional_id_pattern", None)
    try:
        pattern = re.compile(source) if source else None  # v2, KIP-1152; empty: everything
    except re.error as exc:
        log.info("ListTransactions: transactional id pattern %r refused: %s", str(source)[:200], exc)
        return {"throttle_time": 0, "error_code": int(ErrorCode.INVALID_REGULAR_EXPRESSION),
                "unknown_state_filters": [], "transaction_states": []}
    flt = ListFilter(frozenset(s for s in states.values() if s is not None),
                     frozenset(int(p) for p in req.producer_id_filters),
                     int(getattr(req, "duration_filter", -1)), pattern)
    unknown = [s for s, state in states.items() if state is None]
    now = ctx.now_ms()
    found = []
    if not unknown or flt.states:
        found = [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                  "transaction_state": m.state.kafka_name}
                 for m in ctx.transactions.core.transactions() if flt.matches(m, now)]
    return {"throttle_time": 0, "error_code": 0, "unknown_state_filters": unknown,
            "transaction_states": found}
