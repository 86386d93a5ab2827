"""The partition's properties defined once (``floodmark.spec.partition``), over plain
``ReplicaView`` values: each answers None when it holds and one line when it does not, in the
same words whichever runner (the simulator's checker, the model checker) asks."""

from __future__ import annotations

from floodmark.spec import partition as spec
from floodmark.spec.entries import is_marker_label, marker_label

A = spec.ReplicaView("A", [(0, "m1"), (0, "m2"), (1, "m3")], high_watermark=2, leader_epoch=1,
                     is_leader=True, last_stable_offset=2)
B = spec.ReplicaView("B", [(0, "m1"), (0, "m2")], high_watermark=2, leader_epoch=1,
                     is_leader=False)


def test_hw_lso_and_leo() -> None:
    assert spec.hw_above_leo(A) is None and spec.lso_above_hw(A) is None
    assert spec.hw_above_leo(B._replace(high_watermark=3)) == "B HW 3 > LEO 2"
    assert spec.lso_above_hw(A._replace(last_stable_offset=3)) == "A LSO 3 > HW 2"
    assert spec.lso_above_hw(B) is None  # -1: no producer state kept (the model checker)


def test_one_leader_per_epoch_over_a_history_and_over_one_state() -> None:
    history = {1: "A"}
    assert spec.other_leader(history, 1, "A") is None
    assert spec.other_leader(history, 1, "B") == "A"
    assert spec.other_leader(history, 2, "B") is None
    assert spec.one_leader_per_epoch([A, B]) is None
    assert spec.one_leader_per_epoch([A, B._replace(is_leader=True)]) == "A and B both led epoch 1"


def test_log_matching_below_the_lower_hw_only() -> None:
    assert spec.log_matching([A, B]) is None
    other = B._replace(log=[(0, "m1"), (1, "x")])
    assert spec.log_mismatch(A, other) == (
        "A and B differ at offset 1 below min HW 2: (0, 'm2') vs (1, 'x')")
    assert spec.log_mismatch(A, other._replace(high_watermark=1)) is None


def test_monotonic_hw_and_epoch() -> None:
    assert spec.leader_hw_decreased("A", 1, 2, 2) is None
    assert spec.leader_hw_decreased("A", 1, 3, 2) == "leader A's HW went from 3 to 2 in epoch 1"
    assert spec.epoch_decreased("A", 1, 2) is None
    assert spec.epoch_decreased("A", 2, 1) == "A went from epoch 2 to 1"


def test_kept_records_and_one_record_per_offset() -> None:
    assert spec.lacks_record(A, 1, "m2") is None
    assert spec.lacks_record(A, 1, "m2", epoch=1) == "A lacks committed m2 at offset 1 (has m2)"
    assert spec.lacks_record(B, 2, "m3", what="acknowledged", who="new leader B (epoch 2)") == (
        "new leader B (epoch 2) lacks acknowledged m3 at offset 2 (has nothing)")
    assert spec.commit_conflict({0: "m1"}, 0, "m1") is None
    assert spec.commit_conflict({0: "m1"}, 0, "x") == "m1"
    assert spec.commit_conflict({0: "m1"}, 1, "x") is None


def test_divergence_duplicates_and_read_committed() -> None:
    assert spec.divergence([A, B]) is None
    assert spec.divergence([A, B._replace(log=[(0, "m1"), (0, "m2"), (2, "m4")])]) == (
        "replicas differ at offset 2: A=m3@e1, B=m4@e2")
    commit = marker_label(7, True)
    twice = B._replace(log=[(0, "m1"), (0, commit), (0, commit), (0, "m1")])
    assert spec.duplicate_record(twice, lambda r: isinstance(r, str) and is_marker_label(r)) == (
        "B holds m1 at offsets 0 and 3")
    assert spec.duplicate_record(twice._replace(log=twice.log[:3]), lambda r: r == commit) is None
    assert [spec.uncommitted_shown(d) for d in (None, False, True)] == ["open", "aborted", None]
