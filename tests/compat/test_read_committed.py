"""read_committed against a real floodmark broker: transactional batches and WriteTxnMarkers
(written through floodmark's client until the transaction coordinator is there), read by
librdkafka and kafka-python consumers with isolation.level=read_committed, and by floodmark's
own reader (``client.fetch``)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from floodmark.client.cluster import ClusterClient
from floodmark.client.fetch import FetchClient, visible_records
from floodmark.client.transactions import MarkerRefused, write_txn_marker
from floodmark.constants import LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED
from floodmark.errors import ErrorCode
from floodmark.records import decode_records, iter_batches
from tests.compat.txn_helpers import (
    NO_VERIFICATION,
    create_topic,
    new_producer_id,
    produce,
    read_committed_confluent,
    read_committed_kafka_python,
)
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.integration

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The module's broker, without KIP-890 verification (``txn_helpers``)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", list(NO_VERIFICATION)).start()
    yield b
    b.stop()


def _lso(bootstrap: str, topic: str) -> int:
    reader = FetchClient(bootstrap, isolation_level=READ_COMMITTED)
    try:
        return reader.list_offset(topic, 0, LATEST_TIMESTAMP)
    finally:
        reader.close()


def _read_with_floodmark(bootstrap: str, topic: str, isolation: int = READ_COMMITTED
                         ) -> list[bytes | None]:
    """floodmark's own read path (``client.fetch``, what the Spark reader uses), fetching a
    few bytes at a time so that aborted ranges span several answers."""
    reader = FetchClient(bootstrap, isolation_level=isolation)
    try:
        end = reader.bounds(topic, 0).end_for(isolation)
        out: list[bytes | None] = []
        offset = 0
        while offset < end:
            fetched = reader.fetch(topic, 0, offset, max_bytes=1)
            assert fetched.error_code == 0
            batches = list(iter_batches(fetched.records))
            assert batches, f"no progress at offset {offset}"
            out.extend(r.value for r in visible_records(fetched, offset, isolation))
            offset = batches[-1][1].next_offset
        return out
    finally:
        reader.close()


def _consume_cli(bootstrap: str, topic: str, level: str) -> list[bytes]:
    """``floodmark consume --isolation-level``, as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "floodmark.cli", "consume", topic, "--bootstrap-server",
         bootstrap, "--from-beginning", "--isolation-level", level, "--timeout-ms", "1500"],
        capture_output=True, timeout=60, check=True)
    return done.stdout.splitlines()


def _describe(bootstrap: str, topic: str, *extra: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "floodmark.cli", "topic", "describe", topic,
         "--bootstrap-server", bootstrap, *extra], capture_output=True, timeout=60, check=True)
    return done.stdout.decode()


def test_open_committed_and_aborted_transactions(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"rc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    with ClusterClient(broker.bootstrap) as cluster:
        pid_a, pid_c = new_producer_id(cluster), new_producer_id(cluster)
        assert produce(cluster, topic, 0, [b"plain-0"]) == (0, 0)
        # Transaction A opens at offset 1; transaction C at 4, interleaved.
        assert produce(cluster, topic, 0, [b"abort-0", b"abort-1"], producer_id=pid_a,
                       producer_epoch=0, base_sequence=0, transactional=True) == (0, 1)
        assert produce(cluster, topic, 0, [b"plain-1"]) == (0, 3)
        assert produce(cluster, topic, 0, [b"commit-0"], producer_id=pid_c, producer_epoch=0,
                       base_sequence=0, transactional=True) == (0, 4)
        # A plain batch from a producer inside its transaction is refused.
        code, _ = produce(cluster, topic, 0, [b"x"], producer_id=pid_a, producer_epoch=0,
                          base_sequence=2)
        assert code == ErrorCode.INVALID_TXN_STATE
        assert _lso(broker.bootstrap, topic) == 1  # the LSO stops at the open transaction

        write_txn_marker(cluster, topic, 0, pid_a, 0, committed=False)  # abort A (offset 5)
        assert _lso(broker.bootstrap, topic) == 4  # C is still open
        assert produce(cluster, topic, 0, [b"commit-1"], producer_id=pid_c, producer_epoch=0,
                       base_sequence=1, transactional=True) == (0, 6)
        write_txn_marker(cluster, topic, 0, pid_c, 0, committed=True)  # commit C (offset 7)
        assert produce(cluster, topic, 0, [b"end"]) == (0, 8)
        assert _lso(broker.bootstrap, topic) == 9

        # A marker from an older producer epoch is fenced.
        produce(cluster, topic, 0, [b"late"], producer_id=pid_a, producer_epoch=1,
                base_sequence=0, transactional=True)
        with pytest.raises(MarkerRefused) as refused:
            write_txn_marker(cluster, topic, 0, pid_a, 0, committed=True)
        assert refused.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        write_txn_marker(cluster, topic, 0, pid_a, 1, committed=False)
        assert produce(cluster, topic, 0, [b"last"]) == (0, 11)

    expected = [b"plain-0", b"plain-1", b"commit-0", b"commit-1", b"end", b"last"]
    assert _read_with_floodmark(broker.bootstrap, topic) == expected
    assert _consume_cli(broker.bootstrap, topic, "read_committed") == expected
    assert len(_consume_cli(broker.bootstrap, topic, "read_uncommitted")) == 9
    # read_uncommitted sees everything but the markers.
    assert len(_read_with_floodmark(broker.bootstrap, topic, READ_UNCOMMITTED)) == 9
    assert read_committed_confluent(broker.bootstrap, topic, 0, b"last") == expected
    assert read_committed_kafka_python(broker.bootstrap, topic, 0, b"last") == expected


def test_read_committed_waits_for_the_marker(broker) -> None:  # type: ignore[no-untyped-def]
    """Records after an open transaction are invisible to read_committed until its marker,
    even the committed plain records behind it."""
    topic = f"rc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    with ClusterClient(broker.bootstrap) as cluster:
        pid = new_producer_id(cluster)
        produce(cluster, topic, 0, [b"before"])
        produce(cluster, topic, 0, [b"t-0"], producer_id=pid, producer_epoch=0,
                base_sequence=0, transactional=True)
        produce(cluster, topic, 0, [b"after"])
        reader = FetchClient(broker.bootstrap, isolation_level=READ_COMMITTED)
        try:
            bounds = reader.bounds(topic, 0)
            assert (bounds.high_watermark, bounds.last_stable_offset) == (3, 1)
            assert "HW 3 LSO 1 LEO 3" in _describe(broker.bootstrap, topic)
            described = json.loads(_describe(broker.bootstrap, topic, "--json"))
            assert described["partitions"][0]["last_stable_offset"] == 1
            fetched = reader.fetch(topic, 0, 0, max_bytes=1 << 20)
            assert fetched.last_stable_offset == 1
            assert [r.value for r in decode_records(fetched.records)] == [b"before"]
            write_txn_marker(cluster, topic, 0, pid, 0, committed=True)
            bounds = reader.bounds(topic, 0)
            assert (bounds.high_watermark, bounds.last_stable_offset) == (4, 4)
            assert "HW 4 LEO 4" in _describe(broker.bootstrap, topic)  # no LSO: none open
        finally:
            reader.close()
    assert read_committed_confluent(broker.bootstrap, topic, 0, b"after") == [
        b"before", b"t-0", b"after"]
