"""WriteTxnMarkers (API key 27): the transaction coordinator asks partition leaders to end a
transaction with a COMMIT or ABORT marker (KIP-98).

Each partition's marker goes through the core (``replication.produce.write_marker_as_leader``):
appended as a control batch on the leader (NOT_LEADER_OR_FOLLOWER elsewhere), its abort indexed,
and answered like an acks=all produce, once the high watermark passes it. The coordinator treats
NONE as "the marker is written for good" and forgets the transaction, so the answer must never
come before the marker is replicated to the ISR. A partition that is not answered within
``MARKER_TIMEOUT_MS`` answers REQUEST_TIMED_OUT and the coordinator retries (a second marker
completes nothing and is harmless).

After a replicated marker on a ``__consumer_offsets`` partition the group coordinator's
``OffsetStore.on_transaction_marker`` settles the producer's pending transactional offsets.
"""

from __future__ import annotations

import asyncio
import logging

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest, WireResponse
from floodmark.broker.context import HandlerContext
from floodmark.errors import ErrorCode
from floodmark.metadata import OFFSETS_TOPIC
from floodmark.replication import write_marker_as_leader
from floodmark.wire import RequestHeader

log = logging.getLogger(__name__)

MARKER_TIMEOUT_MS = 30_000  # Kafka uses request.timeout.ms (30 s) for the markers' append


class _Waiting:
    """One partition's marker parked until the HW passes it."""

    __slots__ = ("answer", "committed", "future", "producer_epoch", "producer_id", "topic_partition")

    def __init__(self, answer: WireResponse, future: asyncio.Future[tuple[ErrorCode, int]],
                 topic_partition: tuple[str, int], producer_id: int, producer_epoch: int,
                 committed: bool) -> None:
        self.answer = answer
        self.future = future
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.committed = committed


def write_txn_markers(ctx: HandlerContext, header: RequestHeader, req: WireRequest,
                      conn: ClientConnection) -> HandlerResult:
    now_ms = ctx.now_ms()
    markers: list[WireResponse] = []
    waiting: list[_Waiting] = []
    for marker in req.markers:
        producer_id = int(marker.producer_id)
        producer_epoch = int(marker.producer_epoch)
        committed = bool(marker.transaction_result)
        coordinator_epoch = int(marker.coordinator_epoch)
        topics = []
        for t in marker.topics:
            parts = []
            for index in t.partition_indexes:
                answer: WireResponse = {"partition_index": int(index), "error_code": 0}
                parts.append(answer)
                key = (str(t.name), int(index))
                ps = ctx.partitions.get(key)
                if ps is None:
                    answer["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                produce_id = ctx.next_produce_id()
                result = write_marker_as_leader(
                    ps.core, ps.log, producer_id, producer_epoch, committed, coordinator_epoch,
                    produce_id=produce_id, now_ms=now_ms, timeout_ms=MARKER_TIMEOUT_MS)
                ps.apply(result.effects)
                if result.parked:
                    waiting.append(_Waiting(answer, ctx.park_produce(produce_id), key,
                                            producer_id, producer_epoch, committed))
                    continue
                assert result.answer is not None
                answer["error_code"] = int(result.answer)
                if result.answer is ErrorCode.NONE:
                    _written(ctx, key, producer_id, producer_epoch, committed)
                elif result.answer not in (ErrorCode.NOT_LEADER_OR_FOLLOWER,):
                    log.info("partition %s-%d leader_epoch=%d refused %s marker of producer %d "
                             "epoch %d: %s %s", key[0], key[1], ps.leader_epoch,
                             "COMMIT" if committed else "ABORT", producer_id, producer_epoch,
                             result.answer.name, result.error_message or "")
            topics.append({"name": t.name, "partitions": parts})
        markers.append({"producer_id": producer_id, "topics": topics})
    response = {"markers": markers}
    if not waiting:
        return response
    return _await_markers(ctx, response, waiting)


async def _await_markers(ctx: HandlerContext, response: WireResponse,
                         waiting: list[_Waiting]) -> WireResponse:
    for w in waiting:
        error, _offset = await w.future
        w.answer["error_code"] = int(error)
        if error is ErrorCode.NONE:
            _written(ctx, w.topic_partition, w.producer_id, w.producer_epoch, w.committed)
    return response


def _written(ctx: HandlerContext, key: tuple[str, int], producer_id: int, producer_epoch: int,
             committed: bool) -> None:
    """The marker is replicated: settle the transactional offsets it ends."""
    if key[0] == OFFSETS_TOPIC:
        ctx.offsets.on_transaction_marker(key, producer_id, producer_epoch, committed)
