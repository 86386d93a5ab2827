"""A record sent with the (producer id, epoch, sequence) of a batch that an aborted transaction
left in the log, against real Apache Kafka and against floodmark (``aborted_duplicate``).

Kafka's answer is recorded as a fact: with the transaction protocol librdkafka speaks (EndTxn
v3, no epoch bump when a transaction ends), Kafka 4.1's leader finds the aborted batch as the
duplicate of the new one (``ProducerStateEntry.findDuplicateBatch``: the ABORT marker leaves the
producer's batch metadata in place), answers success with the aborted batch's offset, writes
nothing, and the commit that follows commits a record that is in no log. floodmark must lose
nothing: refuse the record, or have it readable after the commit (since 3542a36 it answers
OUT_OF_ORDER_SEQUENCE_NUMBER).

With transaction.version 2 (KIP-890 part 2: EndTxn v5 bumps the epoch when a transaction ends),
Kafka fences the old (P, E) instead: the same bytes are refused with INVALID_PRODUCER_EPOCH;
floodmark serves EndTxn v5 and Produce v12 and answers the same, step by step (compared field by
field with Kafka's answers).
"""

from __future__ import annotations

from typing import Any

import pytest

from floodmark.errors import ErrorCode
from tests.reference.aborted_duplicate import V2, Outcome, run, side_by_side
from tests.reference.kafka_node import KafkaCluster, kafka_version

pytestmark = pytest.mark.integration

_seen: dict[str, Outcome] = {}


def test_kafka_answers_the_aborted_batch_as_the_duplicate(kafka_broker: KafkaCluster) -> None:
    o = _seen[f"Kafka {kafka_version()}"] = run(kafka_broker.bootstrap)
    assert (o.aborted_produce_error, o.aborted_produce_offset, o.abort_error) == (0, 0, 0)
    assert o.end_after_abort == 2  # the batch and its ABORT marker
    # The fact: success, pointing at the aborted batch; nothing appended; the commit succeeds.
    assert (o.second_produce_error, o.second_produce_offset) == (ErrorCode.NONE, 0)
    assert o.commit_error == 0
    assert o.end_after_commit == 3  # only the COMMIT marker was added
    assert o.committed_values == ()
    assert o.lost_acknowledged_record


def test_kafka_with_transaction_version_2_fences_the_old_epoch(kafka_broker: KafkaCluster) -> None:
    o = run(kafka_broker.bootstrap, protocol=V2)
    assert (o.aborted_produce_error, o.abort_error) == (0, 0)
    assert o.epoch_after_abort == o.producer_epoch + 1
    assert o.second_produce_error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert o.commit_error == ErrorCode.INVALID_TXN_STATE  # nothing was added after the abort
    assert o.end_after_commit == o.end_after_abort == 2
    assert not o.lost_acknowledged_record


def test_floodmark_loses_nothing(broker: Any) -> None:
    o = _seen["floodmark"] = run(broker.bootstrap)
    print("\n" + side_by_side(_seen))
    assert (o.aborted_produce_error, o.abort_error, o.end_after_abort) == (0, 0, 2)
    if o.second_produce_error == 0:
        assert o.second_record_readable, "acknowledged and committed, but in no log"
        assert o.second_produce_offset == o.end_after_abort
    else:
        assert o.second_produce_error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert b"committed" not in o.committed_values
    assert not o.lost_acknowledged_record


def _without_ids(o: Outcome) -> dict[str, object]:
    """The answers, less what each broker numbers its own way (the producer id)."""
    return {k: v for k, v in vars(o).items() if k != "producer_id"}


def test_floodmark_with_transaction_version_2_fences_the_old_epoch(broker: Any) -> None:
    """floodmark serves EndTxn v5 and Produce v12 (KIP-890 part 2): the same requests, the
    same answers as Kafka's above."""
    o = run(broker.bootstrap, protocol=V2)
    assert (o.aborted_produce_error, o.abort_error) == (0, 0)
    assert o.epoch_after_abort == o.producer_epoch + 1
    assert o.second_produce_error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert o.commit_error == ErrorCode.INVALID_TXN_STATE
    assert o.end_after_commit == o.end_after_abort == 2
    assert o.committed_values == ()


def test_transaction_version_2_answers_equal_kafkas(kafka_broker: KafkaCluster,
                                                    broker: Any) -> None:
    kafka = run(kafka_broker.bootstrap, protocol=V2)
    ours = run(broker.bootstrap, protocol=V2)
    print("\n" + side_by_side({f"Kafka {kafka_version()}": kafka, "floodmark": ours}))
    assert _without_ids(ours) == _without_ids(kafka)
