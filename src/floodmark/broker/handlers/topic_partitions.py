"""DescribeTopicPartitions (KIP-966, Kafka 3.8+): the partitions of topics, paged, as Kafka's
``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache.describeTopicResponse``
answer it. Kafka's admin client describes topics with it where the broker offers it.

* No topic named: every topic (those the caller may Describe), from the cursor's topic on.
  Topics named: those at or after the cursor's topic (which must be among them), each one the
  caller may not Describe answered TOPIC_AUTHORIZATION_FAILED with no topic id, an unknown one
  UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name no topic can have).
* Topics in name order; partitions from the cursor's partition in the cursor's topic (0 in the
  others), at most ``response_partition_limit`` of them in all (between 1 and
  ``max.request.partition.size.limit``, Kafka's 2000). Where the answer stops, ``next_cursor``
  names the first partition left out (partition 0 of the next topic when the limit is reached
  exactly at a topic's end and topics remain).
* A partition: its leader (-1 while none, or while this broker stepped down from leading, as
  Metadata answers), leader epoch, replicas and ISR. Eligible leader replicas (KIP-966) are not
  in the brokers' metadata view: answered empty, as Kafka answers while ELR is off.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.broker.handlers.admin import (
    INT32_MIN,
    TOPIC_OPERATIONS,
    _unknown_topic_error,
    stepped_down_partitions,
)
from floodmark.errors import ErrorCode
from floodmark.metadata import INTERNAL_TOPICS, TopicMeta
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext

log = logging.getLogger(__name__)

# Kafka's ``max.request.partition.size.limit`` default: the most partitions one answer holds.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
_ZERO_UUID = uuid.UUID(int=0)


def describe_topic_partitions(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                              conn: ClientConnection | None = None, *,
                              may_describe: Callable[[str], bool] | None = None,
                              operations: Callable[[str], int] | None = None) -> WireResponse:
    """``may_describe`` / ``operations``: authorization's answers for a topic name (dispatch's
    check, when an authorizer is on); without them every topic is visible with every
    operation."""
    topics_meta = broker.controller.topics()
    cursor = req.cursor
    cursor_topic = str(cursor.topic_name) if cursor is not None else ""
    fetch_all = not req.topics
    if fetch_all:
        names = {n for n in topics_meta if n >= cursor_topic}
    else:
        names = {str(t.name) for t in req.topics if str(t.name) >= cursor_topic}
        if cursor is not None and cursor_topic not in names:
            return _refused(req, "DescribeTopicPartitionsRequest topic list should contain the "
                                 f"cursor topic: {cursor_topic}")
    if cursor is not None and int(cursor.partition_index) < 0:
        return _refused(req, "DescribeTopicPartitionsRequest cursor partition must be valid: "
                             f"{cursor_topic}-{int(cursor.partition_index)}")
    visible = may_describe or (lambda _name: True)
    ops = operations or (lambda _name: TOPIC_OPERATIONS)
    allowed = [n for n in sorted(names) if visible(n)]
    denied = [] if fetch_all else sorted(n for n in names if not visible(n))
    limit = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, int(req.response_partition_limit)), 1)
    stepped_down = stepped_down_partitions(broker)
    remaining = limit
    topics: list[WireResponse] = []
    next_cursor: WireResponse | None = None
    for name in allowed:
        if remaining == 0:
            # The limit was reached at the end of the previous topic: the next page starts here
            # (whether or not this topic exists).
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        meta = topics_meta.get(name)
        if meta is None:
            if not fetch_all:
                topics.append(_topic(name, _unknown_topic_error(name), _ZERO_UUID,
                                     name in INTERNAL_TOPICS, [], ops(name)))
            continue
        start = int(cursor.partition_index) if cursor is not None and name == cursor_topic else 0
        count = len(meta.partitions)
        upper = min(count, start + remaining)
        partitions = _partitions(meta, name, start, upper, stepped_down)
        topics.append(_topic(name, ErrorCode.NONE, meta.topic_id, meta.internal, partitions,
                             ops(name)))
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(partitions)
    topics += [_topic(n, ErrorCode.TOPIC_AUTHORIZATION_FAILED, _ZERO_UUID, False, [], INT32_MIN)
               for n in denied]
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}


def _partitions(meta: TopicMeta, name: str, start: int, upper: int,
                stepped_down: set[tuple[str, int]]) -> list[WireResponse]:
    return [{
        "error_code": 0,
        "partition_index": p.partition,
        "leader_id": -1 if (name, p.partition) in stepped_down else p.leader,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": [],
    } for p in sorted(meta.partitions, key=lambda p: p.partition) if start <= p.partition < upper]


def _topic(name: str, error: ErrorCode, topic_id: uuid.UUID, internal: bool,
           partitions: list[WireResponse], operations: int) -> WireResponse:
    return {"error_code": int(error), "name": name, "topic_id": topic_id,
            "is_internal": internal, "partitions": partitions,
            "topic_authorized_operations": operations}


def _refused(req: WireRequest, message: str) -> WireResponse:
    """Kafka's answer to an InvalidRequestException here (the request's error response): each
    topic named INVALID_REQUEST, nothing else; the reason goes to the log (the response has no
    message field)."""
    log.info("DescribeTopicPartitions refused: %s", message)
    return {"throttle_time": 0, "next_cursor": None, "topics": [
        _topic(str(t.name), ErrorCode.INVALID_REQUEST, _ZERO_UUID, False, [], INT32_MIN)
        for t in req.topics]}
