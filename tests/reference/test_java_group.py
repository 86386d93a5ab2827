"""The checks ``tests/reference/java_group.py`` makes of the Java members' output can fail: two
members owning one partition at once, and a member moving backwards within one ownership, are
found; a clean hand-over is not one (pure logic, lines as GroupConsumer.java prints them)."""

from __future__ import annotations

from tests.reference.java_group import Member, backwards, overlaps, ownership


def member(name: str, *lines: str) -> Member:
    m = Member.__new__(Member)  # the output only: no JVM
    m.name, m.lines = name, list(lines)
    return m


def test_a_hand_over_after_the_revocation_is_no_overlap() -> None:
    a = member("a", "ASSIGNED 100 0,1", "REC 0 0", "REVOKED 200 0,1", "ASSIGNED 210 1")
    b = member("b", "ASSIGNED 200 0", "REC 0 1")
    assert ownership(a) == [(0, 100, 200), (1, 100, 200), (1, 210, float("inf"))]
    assert overlaps([a, b]) == []
    assert a.assigned() == {1} and b.assigned() == {0}


def test_two_owners_at_once_are_found() -> None:
    a = member("a", "ASSIGNED 100 0,1", "REVOKED 300 0,1")
    b = member("b", "ASSIGNED 250 1", "LOST 400 1")
    assert overlaps([a, b]) == ["partition 1: a 100..300, b 250..400"]
    still = member("c", "ASSIGNED 350 0")  # a's partition 0 ended at 300: no overlap
    assert overlaps([a, still]) == []
    assert overlaps([member("d", "ASSIGNED 50 0"), still]) != []  # both still own 0


def test_backwards_within_one_ownership_only() -> None:
    ok = member("a", "ASSIGNED 1 0", "REC 0 5", "REC 0 6", "REVOKED 2 0", "ASSIGNED 3 0",
                "REC 0 6")
    bad = member("b", "ASSIGNED 1 0", "REC 0 5", "REC 0 5")
    assert backwards([ok]) == []
    assert backwards([bad]) == [("b", 0, 5, 5)]
