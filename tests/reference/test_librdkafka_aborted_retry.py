"""librdkafka (confluent-kafka) reuses the producer id, epoch and sequence of a record that an
aborted transaction purged from its retry queue (``librdkafka_aborted_retry``): real Kafka
answers the new record as the duplicate of the aborted one and the committed record is lost;
floodmark must lose nothing. Two 3-broker clusters: slow (about 2 minutes on 2 cores).

    PYTHONPATH=src .venv/bin/python -m pytest -m slow -s tests/reference/test_librdkafka_aborted_retry.py
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from floodmark.cluster import LocalCluster
from tests.reference.kafka_node import KafkaCluster, kafka_version, missing_reason
from tests.reference.librdkafka_aborted_retry import RetryOutcome, run

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# The transaction log on one replica: the paused follower must not hold up the coordinator.
TXN_LOG = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
_seen: dict[str, RetryOutcome] = {}


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka3"), 3, TXN_LOG).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def floodmark3(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "fm", brokers=3, broker_settings=dict(TXN_LOG),
                           combined=True, metrics=False).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _report(name: str, o: RetryOutcome) -> None:
    _seen[name] = o
    for who, seen in _seen.items():
        print(f"\n{who}: first at {seen.first_offset} ({seen.first_report}); abort "
              f"{'ok' if seen.abort_ok else 'failed'}; second answered "
              f"{seen.second_error or 'success'} at offset {seen.second_offset}; commit "
              f"{'ok' if seen.commit_ok else 'failed'}; read_committed {seen.committed_values}; "
              f"log end {seen.log_end}; lost: {seen.lost_acknowledged_record}")
        print("  " + "\n  ".join(seen.sequences))


def test_kafka_loses_the_record_librdkafka_sends_at_the_purged_sequence(
        kafka3: KafkaCluster) -> None:
    o = run(kafka3.bootstrap, {n.node_id: n.pid for n in kafka3.nodes if n.pid})
    _report(f"Kafka {kafka_version()}", o)
    assert o.first_offset == 1 and "Purged" in o.first_report and o.abort_ok
    # the fact: success at the aborted record's offset, commit ok, nothing to read
    assert (o.second_error, o.second_offset, o.commit_ok) == (None, 1, True)
    assert o.committed_values == () and o.log_end == 4  # pre, first, ABORT, COMMIT
    assert o.lost_acknowledged_record


def test_floodmark_loses_nothing_through_librdkafka(floodmark3: LocalCluster) -> None:
    pids = {n: p for n in floodmark3.broker_ids if (p := floodmark3.pid(n)) is not None}
    o = run(floodmark3.bootstrap, pids)
    _report("floodmark", o)
    assert o.first_offset == 1 and o.abort_ok
    # refused (OUT_OF_ORDER_SEQUENCE_NUMBER since 3542a36: the commit then fails too), or kept
    assert o.second_error is not None or b"second" in o.committed_values
    assert not o.lost_acknowledged_record
