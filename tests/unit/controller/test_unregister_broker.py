"""UnregisterBroker in the controller (Kafka's ``ReplicationControlManager.unregisterBroker``):
the registration goes after the broker left every ISR and ELR, by an ``unregister_broker``
record that replays (a restarted controller, a snapshot) to the same image; an id with no
registration is BROKER_ID_NOT_REGISTERED and writes nothing."""

from __future__ import annotations

import pytest

from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.record_check import check_record
from floodmark.controller.snapshot import image_from_records, image_records
from floodmark.errors import ErrorCode, KafkaError


def _cluster() -> tuple[ControllerLogic, dict[int, int]]:
    logic = ControllerLogic(MetadataImage(), ControllerConfig())
    logic.bootstrap()
    epochs = {b: logic.register_broker(b, "127.0.0.1", 9000 + b, f"i{b}", 0) for b in (1, 2, 3)}
    for b, epoch in epochs.items():
        logic.heartbeat(b, epoch, 0)
    logic.create_topic("t", 2, 3, {}, assignments=[(1, 2, 3), (3, 1, 2)])
    return logic, epochs



def test_a_fenced_broker_is_unregistered_and_the_record_replays() -> None:
    logic, epochs = _cluster()
    logic.fence_broker(3, "test: shut down")
    assert logic.image.topics["t"].partitions[1].leader != 3
    logic.unregister_broker(3)
    assert set(logic.image.brokers) == {1, 2}
    for reg in logic.image.topics["t"].partitions.values():
        assert 3 not in reg.isr and reg.leader in (1, 2) and 3 not in reg.elr
    records = logic.take_pending()
    assert records[-1][1] == {"type": "unregister_broker", "broker_id": 3,
                              "broker_epoch": epochs[3]}
    for _offset, rec in records:
        check_record(rec)
    replayed = MetadataImage()
    replayed.apply_all(records)
    assert set(replayed.brokers) == {1, 2}
    again = image_from_records(logic.image.next_offset, image_records(logic.image))
    assert set(again.brokers) == {1, 2}
    # A heartbeat of the removed registration is stale: the broker registers again.
    assert logic.heartbeat(3, epochs[3], 10).error is ErrorCode.STALE_BROKER_EPOCH


def test_an_active_leader_is_unregistered_as_kafka_does() -> None:
    """Kafka refuses only an id with no registration: an active broker loses its leaderships
    and ISR places; its next heartbeat finds its epoch stale and it registers anew."""
    logic, _epochs = _cluster()
    assert logic.image.topics["t"].partitions[0].leader == 1
    logic.unregister_broker(1)
    assert 1 not in logic.image.brokers
    part = logic.image.topics["t"].partitions[0]
    assert part.leader in (2, 3) and 1 not in part.isr
    epoch = logic.register_broker(1, "127.0.0.1", 9001, "i1-new", 20)
    assert logic.image.brokers[1].broker_epoch == epoch


def test_an_unknown_id_is_refused_and_nothing_is_written() -> None:
    logic, _epochs = _cluster()
    logic.take_pending()
    with pytest.raises(KafkaError) as refused:
        logic.unregister_broker(7)
    assert refused.value.code is ErrorCode.BROKER_ID_NOT_REGISTERED
    assert refused.value.message == "Broker ID 7 is not currently registered"
    assert logic.take_pending() == []


def test_a_record_of_an_older_epoch_changes_nothing() -> None:
    logic, epochs = _cluster()
    image = MetadataImage()
    image.apply_all(logic.take_pending())
    image.apply_all([(image.next_offset, {"type": "unregister_broker", "broker_id": 2,
                                          "broker_epoch": epochs[2] - 1})])
    assert set(image.brokers) == {1, 2, 3}
