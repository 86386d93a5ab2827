"""Real Apache Kafka for the reference tests: one single-node KRaft cluster per test session
(``kafka_broker``), started from the jars ``tools/kafka/pom.xml`` pins (fetched on first use),
stopped by its pid at the end. Skipped, with the reason, where Java or Maven is missing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reference.kafka_node import KafkaCluster, missing_reason

INTERNAL_PARTITIONS = {"transaction.state.log.num.partitions": "4",
                       "offsets.topic.num.partitions": "4"}


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    # Fewer partitions of Kafka's internal topics than its 50: created on first use, each one
    # costs the test time and changes no answer the tests compare.
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka"), 1, INTERNAL_PARTITIONS,
                           short_run_jvm=True).start()
    try:
        yield cluster
    finally:
        cluster.stop()
