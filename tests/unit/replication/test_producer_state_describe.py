"""What DescribeProducers (KIP-664) reads of a partition's producer table: every producer with
its epoch, last sequence, last timestamp (its last batch's or marker's max timestamp),
coordinator epoch and open transaction's first offset; the same from the batch headers a
follower replicates or a restarted log scans as from a leader's appends."""

from __future__ import annotations

from floodmark.records import ControlType, EndTxnMarker, Record, build_batch, iter_batches
from floodmark.replication.producer_state import BatchMeta, ProducerStateTable, batch_metas


def _row(table: ProducerStateTable) -> list[tuple[int, int, int, int, int, int]]:
    return [(pid, e.producer_epoch, e.last_sequence, e.last_timestamp, e.coordinator_epoch,
             e.current_txn_first_offset) for pid, e in table.active()]


def test_a_producers_last_batch_and_its_open_transaction() -> None:
    t = ProducerStateTable()
    assert _row(t) == []
    t.record(BatchMeta(9, 1, 0, 2, 1, False, max_timestamp=100), 0)
    t.record(BatchMeta(4, 0, 0, 1, 0, True, max_timestamp=150), 2)
    t.record(BatchMeta(4, 0, 1, 3, 2, True, max_timestamp=170), 3)
    assert _row(t) == [(4, 0, 3, 170, -1, 2), (9, 1, 1, 100, -1, -1)]
    marker = EndTxnMarker(ControlType.COMMIT, 6)
    t.record(BatchMeta(4, 0, -1, 1, 0, True, True, marker, max_timestamp=200), 6)
    assert _row(t) == [(4, 0, 3, 200, 6, -1), (9, 1, 1, 100, -1, -1)]


def test_the_timestamp_comes_from_the_batch_header() -> None:
    batch = build_batch([Record(0, 1_000, b"k", b"v"), Record(1, 1_500, b"k", b"w")],
                        producer_id=3, producer_epoch=2, base_sequence=0)
    [meta] = batch_metas(batch) or []
    assert meta.max_timestamp == 1_500
    [(_pos, header)] = list(iter_batches(batch))
    assert BatchMeta.from_header(header).max_timestamp == 1_500
    follower = ProducerStateTable()
    follower.record_batches([header])
    assert _row(follower) == [(3, 2, 1, 1_500, -1, -1)]
