"""AlterPartition on the control channel: one request carries every pending ISR proposal of one
broker, as Kafka's ``AlterPartitionRequest`` does (``topics`` -> ``partitions``, with the broker
id and epoch once for the request), and the answer has an error code and the new registration
per partition. The broker's ``AlterPartitionManager`` sends it; the controller handles every
partition in one call (one batch of PartitionChangeRecords, one commit wait).

Topic names where Kafka has topic ids; ``leader_recovered`` where Kafka sends the leader
recovery state (``AlterPartitionRequest.leader_recovered``: the leader reports it recovered).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from floodmark.controller.image import record_to_registration, registration_to_record
from floodmark.errors import ErrorCode
from floodmark.replication import AlterPartitionRequest, PartitionRegistration

PartitionKey = tuple[str, int]
Answer = tuple[ErrorCode, PartitionRegistration | None]


def encode_request(broker_id: int, broker_epoch: int,
                   proposals: Iterable[tuple[PartitionKey, AlterPartitionRequest]]
                   ) -> dict[str, Any]:
    """The request's arguments: ``broker_epoch`` is the broker's epoch when it sends (Kafka's
    ``brokerEpochSupplier``), not the one each proposal was made under."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), req in proposals:
        topics.setdefault(topic, []).append({
            "partition_index": partition, "leader_epoch": req.leader_epoch,
            "partition_epoch": req.partition_epoch, "new_isr": list(req.new_isr),
            "new_isr_broker_epochs": list(req.new_isr_broker_epochs),
            "leader_recovered": req.leader_recovered})
    return {"broker_id": broker_id, "broker_epoch": broker_epoch,
            "topics": [{"topic_name": name, "partitions": parts}
                       for name, parts in topics.items()]}


def decode_request(args: Mapping[str, Any]) -> list[tuple[PartitionKey, AlterPartitionRequest]]:
    """Every proposal of the request; KeyError, TypeError or ValueError on a malformed one (the
    whole request is refused before any partition changes). A partition named twice is
    malformed (Kafka answers INVALID_REQUEST for duplicates too)."""
    broker_id, broker_epoch = int(args["broker_id"]), int(args["broker_epoch"])
    out: list[tuple[PartitionKey, AlterPartitionRequest]] = []
    seen: set[PartitionKey] = set()
    for t in args["topics"]:
        topic = str(t["topic_name"])
        for p in t["partitions"]:
            key = (topic, int(p["partition_index"]))
            if key in seen:
                raise ValueError(f"partition {topic}-{key[1]} named twice")
            seen.add(key)
            out.append((key, AlterPartitionRequest(
                broker_id=broker_id, broker_epoch=broker_epoch,
                leader_epoch=int(p["leader_epoch"]), partition_epoch=int(p["partition_epoch"]),
                new_isr=tuple(int(r) for r in p["new_isr"]),
                new_isr_broker_epochs=tuple(int(e) for e in p["new_isr_broker_epochs"]),
                leader_recovered=bool(p.get("leader_recovered", False)))))
    return out


def encode_answer(answers: Iterable[tuple[PartitionKey, ErrorCode, PartitionRegistration | None]]
                  ) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error, reg in answers:
        topics.setdefault(topic, []).append({
            "partition_index": partition, "error_code": int(error),
            "registration": registration_to_record(topic, partition, reg) if reg else None})
    return {"error_code": int(ErrorCode.NONE),
            "topics": [{"topic_name": name, "partitions": parts}
                       for name, parts in topics.items()]}


def decode_answer(result: Mapping[str, Any]) -> dict[PartitionKey, Answer]:
    """Each answered partition's error and, when accepted, its new registration."""
    out: dict[PartitionKey, Answer] = {}
    for t in result["topics"]:
        topic = str(t["topic_name"])
        for p in t["partitions"]:
            error = ErrorCode(int(p["error_code"]))
            rec = p.get("registration")
            out[(topic, int(p["partition_index"]))] = (
                error, record_to_registration(rec) if rec and error is ErrorCode.NONE else None)
    return out
