"""CreateTopics hands every topic of a request to the controller at once and answers within the
request's ``timeout_ms`` (librdkafka's 0081 sends 9 topics, 81 partitions at RF 3, and gives
the request 10 s; floodmark created them one after the other and answered late).

Real processes: a 3-broker cluster; confluent-kafka's AdminClient for the many-topic request,
the project's wire client for the exact answers. A timeout of 0 is a deadline already past:
Kafka's controller expires the request before writing anything, every topic answers
REQUEST_TIMED_OUT and none is created; floodmark answers the same.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection
from floodmark.cluster import LocalCluster
from floodmark.errors import ErrorCode
from tests.cluster.helpers import wait_until

TOPICS = 9
PARTITIONS = 9


def _topic(name: str) -> dict[str, object]:
    return {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": []}


def _metadata_names(conn: KafkaConnection, names: list[str]) -> dict[str, int]:
    md = conn.request(3, 9, {"topics": [{"name": n} for n in names],
                             "allow_auto_topic_creation": False})
    return {t.name: int(t.error_code) for t in md.topics}


def test_many_topics_in_one_request_and_a_past_deadline(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, brokers=3).start()
    try:
        bootstrap = cluster.address(cluster.broker_ids[0])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [f"many-{i}" for i in range(TOPICS)]
        futures = admin.create_topics([NewTopic(n, PARTITIONS, 3) for n in names],
                                      operation_timeout=60, request_timeout=90)
        for name in names:
            futures[name].result(120)  # raises on any topic's error (REQUEST_TIMED_OUT too)
        with KafkaConnection(bootstrap, timeout_s=30) as conn:
            wait_until(lambda: set(_metadata_names(conn, names).values()) == {0}, 30,
                       "the 9 topics in metadata")
            md = conn.request(3, 9, {"topics": [{"name": n} for n in names],
                                     "allow_auto_topic_creation": False})
            assert {t.name: len(t.partitions) for t in md.topics} == {n: PARTITIONS
                                                                      for n in names}

            # A deadline already past: nothing is created, each topic says why.
            resp = conn.request(19, 5, {"topics": [_topic("late-a"), _topic("late-b")],
                                        "timeout": 0, "validate_only": False})
            assert [(t.name, int(t.error_code)) for t in resp.topics] == [
                ("late-a", int(ErrorCode.REQUEST_TIMED_OUT)),
                ("late-b", int(ErrorCode.REQUEST_TIMED_OUT))]
            # (the same request with time to spare creates them: the refusal was the deadline)
            resp = conn.request(19, 5, {"topics": [_topic("late-a")], "timeout": 30_000,
                                        "validate_only": False})
            assert [(t.name, int(t.error_code)) for t in resp.topics] == [("late-a", 0)]
            assert _metadata_names(conn, ["late-b"]) == {
                "late-b": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
    finally:
        cluster.stop()
