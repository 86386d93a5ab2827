"""AssignReplicasToDirs (API 73, KIP-858) in the controller: pure unit tests of the logic, the
image and the broker's side of the bookkeeping (``broker.dir_assignments``)."""

from __future__ import annotations

import pytest

from floodmark.broker import dir_assignments
from floodmark.controller.image import UNASSIGNED_DIRECTORY, MetadataImage
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
    logic.create_topic("t", 2, 3, {}, assignments=[(1, 2, 3), (2, 1, 3)])
    return logic, epochs


def test_an_assignment_is_recorded_once_and_outlives_other_partition_changes() -> None:
    logic, epochs = _cluster()
    before = logic.image.topics["t"].partitions[0]
    error, errors = logic.assign_replicas_to_dirs(
        1, epochs[1], {"dir-a": [("t", 0)], "dir-b": [("t", 1), ("t", 7), ("nope", 0)]})
    assert error is ErrorCode.NONE
    assert errors == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE,
                      ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    timage = logic.image.topics["t"]
    assert timage.directories_of(0) == ["dir-a", UNASSIGNED_DIRECTORY, UNASSIGNED_DIRECTORY]
    assert timage.directories_of(1) == [UNASSIGNED_DIRECTORY, "dir-b", UNASSIGNED_DIRECTORY]
    assert timage.partitions[0] == before  # not replication state: leader, ISR, epochs stay
    offset = logic.image.next_offset
    logic.assign_replicas_to_dirs(1, epochs[1], {"dir-a": [("t", 0)]})
    assert logic.image.next_offset == offset  # repeated: no new record
    # A later change of the partition (broker 2 fenced: the ISR shrinks) keeps it.
    logic.fence_broker(2, "test")
    assert 2 not in timage.partitions[0].isr
    assert timage.directories_of(0)[0] == "dir-a"
    # ... and so does a snapshot.
    again = image_from_records(logic.image.next_offset, image_records(logic.image))
    assert again.topics["t"].directories == timage.directories


def test_stale_epochs_and_strangers_are_refused() -> None:
    logic, epochs = _cluster()
    assert logic.assign_replicas_to_dirs(1, epochs[1] + 1, {"d": [("t", 0)]})[0] is (
        ErrorCode.STALE_BROKER_EPOCH)
    logic.create_topic("solo", 1, 1, {}, assignments=[(3,)])
    _, errors = logic.assign_replicas_to_dirs(1, epochs[1], {"d": [("solo", 0)]})
    assert errors == {("solo", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}


def test_a_failed_directory_takes_its_replicas_offline_through_the_assignment() -> None:
    """The heartbeat names only the failed directory: the controller finds its replicas by
    their recorded directories; the broker's replicas elsewhere are untouched; a replica
    assigned to an already failed directory goes offline at its assignment."""
    logic, epochs = _cluster()
    logic.assign_replicas_to_dirs(2, epochs[2], {"dir-x": [("t", 1)], "dir-y": [("t", 0)]})
    assert logic.image.topics["t"].partitions[1].leader == 2
    logic.heartbeat(2, epochs[2], 10, offline_log_dirs=["dir-x"])
    after = logic.image.topics["t"].partitions
    assert after[1].leader != 2 and 2 not in after[1].isr
    assert 2 in after[0].isr  # in its other directory
    logic.create_topic("late", 1, 3, {}, assignments=[(2, 1, 3)])
    logic.heartbeat(2, epochs[2], 20, offline_log_dirs=["dir-x"])
    assert logic.image.topics["late"].partitions[0].leader == 2  # not assigned yet
    logic.assign_replicas_to_dirs(2, epochs[2], {"dir-x": [("late", 0)]})
    assert 2 not in logic.image.topics["late"].partitions[0].isr


def test_a_record_with_directories_not_matching_its_replicas_is_refused() -> None:
    rec = {"type": "partition", "topic": "t", "partition": 0, "replicas": [1, 2], "isr": [1, 2],
           "leader": 1, "leader_epoch": 0, "partition_epoch": 0, "directories": ["a"]}
    with pytest.raises(KafkaError, match="directories"):
        check_record(rec)
    check_record({**rec, "directories": ["a", UNASSIGNED_DIRECTORY]})


def test_the_broker_asks_only_for_what_the_metadata_does_not_show_yet() -> None:
    unassigned = {("t", 0), ("t", 1), ("t", 2), ("gone", 0)}
    actual = {("t", 0): "a", ("t", 1): "b", ("t", 2): "a"}
    recorded = {("t", 1): "b", ("t", 2): "b"}
    todo = dir_assignments.pending(unassigned, actual.get, recorded.get)
    assert todo == {"a": [("t", 0), ("t", 2)]}
    assert unassigned == {("t", 0), ("t", 2)}  # confirmed and removed ones dropped
    assert dir_assignments.request_directories(todo) == [
        {"id": "a", "topics": [{"name": "t", "partitions": [{"partition_index": 0},
                                                             {"partition_index": 2}]}]}]
    assert sum(map(len, dir_assignments.pending(unassigned, actual.get, recorded.get,
                                                limit=1).values())) == 1
