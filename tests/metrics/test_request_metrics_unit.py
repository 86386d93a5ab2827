"""Pure unit tests of the request and topic metrics: the local/remote split of Kafka's
RequestMetrics, ErrorsPerSec's error-code walk, and the exporter-style BrokerTopicMetrics
families (per topic with ``topic``, all topics without)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.create_topics.v7.response import CreatableTopicResult, CreateTopicsResponse
from kio.static.primitive import i32Timedelta

from floodmark.broker.topic_metrics import BrokerTopicMetrics
from floodmark.errors import ErrorCode
from floodmark.metrics import RequestMetrics, count_error_codes
from floodmark.wire.api_table import ApiKey


def _samples(collector: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in collector.collect() for s in family.samples}


def _frame(api_key: int) -> bytes:
    return api_key.to_bytes(2, "big") + b"\x00" * 30


def test_local_and_remote_time_split_at_once_and_awaited_requests() -> None:
    metrics = RequestMetrics()

    async def parked() -> list[bytes]:
        await asyncio.sleep(0.03)  # the remote part: waiting for replication
        return [b"answer"]

    def dispatch(frame: Any, _conn: Any) -> Any:
        return [b"at once"] if frame[1] == ApiKey.METADATA else parked()

    timed = metrics.wrap(dispatch)
    timed(_frame(ApiKey.METADATA), None)
    timed(_frame(ApiKey.METADATA), None)
    asyncio.run(timed(_frame(ApiKey.PRODUCE), None))
    got = _samples(metrics)
    meta = (("request", "Metadata"),)
    produce = (("request", "Produce"),)
    # At once: whole in local, 0 in remote (the first bucket).
    assert got[("kafka_network_requestmetrics_localtimems_count", meta)] == 2
    assert got[("kafka_network_requestmetrics_remotetimems_bucket", (("le", "0.5"), *meta))] == 2
    assert got[("kafka_network_requestmetrics_remotetimems_sum", meta)] == 0
    # Awaited: about 30 ms remote, little local; local + remote = total.
    remote_ms = got[("kafka_network_requestmetrics_remotetimems_sum", produce)]
    local_ms = got[("kafka_network_requestmetrics_localtimems_sum", produce)]
    total_ms = got[("kafka_network_requestmetrics_totaltimems_sum", produce)]
    assert remote_ms >= 25 and local_ms < remote_ms
    assert abs(local_ms + remote_ms - total_ms) < 1e-6
    assert got[("kafka_network_requestmetrics_remotetimems_bucket", (("le", "10"), *produce))] == 0
    assert got[("kafka_network_requestmetrics_remotetimems_bucket", (("le", "+Inf"), *produce))] == 1
    assert got[("kafka_network_requestmetrics_requests_total", produce)] == 1


def test_error_codes_are_counted_at_every_depth_none_included() -> None:
    answer = CreateTopicsResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)), topics=(
        CreatableTopicResult(name="a", topic_id=None, error_code=ErrorCode.NONE,
                             error_message=None, num_partitions=1, replication_factor=1,
                             configs=()),
        CreatableTopicResult(name="b", topic_id=None,
                             error_code=ErrorCode.TOPIC_ALREADY_EXISTS, error_message="exists",
                             num_partitions=-1, replication_factor=-1, configs=()),
    ))
    counts: dict[int, int] = {}
    count_error_codes(answer, counts)
    assert counts == {0: 1, int(ErrorCode.TOPIC_ALREADY_EXISTS): 1}
    counts = {}
    count_error_codes({"error_code": 0, "topics": [{"partitions": [{"error_code": 6},
                                                                   {"error_code": 6}]}]}, counts)
    assert counts == {0: 1, 6: 2}

    metrics = RequestMetrics()
    metrics.count_errors(ApiKey.CREATE_TOPICS, answer)
    metrics.count_error(ApiKey.PRODUCE, int(ErrorCode.NOT_ENOUGH_REPLICAS), 3)
    metrics.count_error(ApiKey.PRODUCE, 9999)
    got = _samples(metrics)
    errors = "kafka_network_requestmetrics_errors_total"
    assert got[(errors, (("error", "TOPIC_ALREADY_EXISTS"), ("request", "CreateTopics")))] == 1
    assert got[(errors, (("error", "NONE"), ("request", "CreateTopics")))] == 1
    assert got[(errors, (("error", "NOT_ENOUGH_REPLICAS"), ("request", "Produce")))] == 3
    assert got[(errors, (("error", "9999"), ("request", "Produce")))] == 1


def test_broker_topic_metrics_per_topic_and_all_topics() -> None:
    topics = BrokerTopicMetrics()
    a, b = topics.counts("a"), topics.counts("b")
    a.bytes_in, a.messages_in, b.bytes_in = 100, 3, 50
    b.bytes_out, topics.replication_bytes_out = 7, 11
    a.total_produce, a.failed_produce = 2, 1
    got = _samples(topics)
    name = "kafka_server_brokertopicmetrics_bytesin_total"
    assert got[(name, (("topic", "a"),))] == 100
    assert got[(name, (("topic", "b"),))] == 50
    assert got[(name, ())] == 150  # the all-topics bean: no topic label
    assert got[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 3
    assert got[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "b"),))] == 7
    assert got[("kafka_server_brokertopicmetrics_failedproducerequests_total", ())] == 1
    assert got[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 11
