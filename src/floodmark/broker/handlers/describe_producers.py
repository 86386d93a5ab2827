"""DescribeProducers (API 61, KIP-664): the active producers of each partition asked about,
from the partition's producer state (``replication/producer_state.py``), as Kafka's
``KafkaApis.handleDescribeProducersRequest`` answers.

Per topic, Kafka's order: a name no topic can have is INVALID_TOPIC_EXCEPTION, one the caller may
not Read is TOPIC_AUTHORIZATION_FAILED (dispatch's check, ``broker/authorization.py``), an
unknown one UNKNOWN_TOPIC_OR_PARTITION, each with its message. Per partition: a replica this
broker hosts answers from its own producer state (Kafka answers on any replica that has the log:
the admin client asks the leader unless told a broker id, as ``kafka-transactions
describe-producers --broker-id`` does); a partition of a known topic that this broker does not
host is NOT_LEADER_OR_FOLLOWER, an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.errors import ErrorCode, KafkaError
from floodmark.metadata import validate_topic_name
from floodmark.replication import ProducerEntry
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

UNKNOWN_MESSAGE = "This server does not host this topic-partition."


def describe_producers(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                       conn: ClientConnection) -> WireResponse:
    topics = broker.controller.topics()
    answers = []
    for t in req.topics:
        name = str(t.name)
        indexes = [int(i) for i in t.partition_indexes]
        error: tuple[ErrorCode, str] | None = None
        try:
            validate_topic_name(name)
        except KafkaError as exc:
            error = (exc.code, exc.message)
        meta = topics.get(name)
        if error is None and meta is None:
            error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_MESSAGE)
        if error is not None:
            parts = [refused(i, *error) for i in indexes]
        else:
            assert meta is not None
            known = {p.partition for p in meta.partitions}
            parts = [_partition(broker, name, i, i in known) for i in indexes]
        answers.append({"name": name, "partitions": parts})
    return {"throttle_time": 0, "topics": answers}


def refused(index: int, error: ErrorCode, message: str | None = None) -> WireResponse:
    return {"partition_index": index, "error_code": int(error), "error_message": message,
            "active_producers": []}


def _partition(broker: HandlerContext, topic: str, index: int, known: bool) -> WireResponse:
    ps = broker.partitions.get((topic, index))
    if ps is None:
        return refused(index, ErrorCode.NOT_LEADER_OR_FOLLOWER if known
                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return {"partition_index": index, "error_code": 0, "error_message": None,
            "active_producers": [producer_state(pid, entry)
                                 for pid, entry in ps.core.producers.active()]}


def producer_state(producer_id: int, entry: ProducerEntry) -> WireResponse:
    return {"producer_id": producer_id, "producer_epoch": entry.producer_epoch,
            "last_sequence": entry.last_sequence, "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": entry.current_txn_first_offset}
