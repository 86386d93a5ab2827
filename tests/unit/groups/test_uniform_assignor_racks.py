"""The rack-aware ``uniform`` assignor: balance first, then members in a replica's rack, then
stickiness; without racks (or when racks cannot matter) exactly the plain assignor."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.groups.consumer_group import records as rec
from floodmark.groups.consumer_group.assignors import AssignmentSpec, uniform_assignor, uses_racks
from floodmark.groups.consumer_group.core import ConsumerGroupCoordinator, CoreConfig, Heartbeat

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)


def tp(p: int, topic: uuid.UUID = T) -> tuple[uuid.UUID, int]:
    return (topic, p)


def spec(members: dict[str, str | None], racks: dict[int, str], current=None,
         count: int = 4) -> AssignmentSpec:
    return AssignmentSpec(
        subscriptions={m: frozenset({T}) for m in members},
        partition_counts={T: count},
        current_target=current or {},
        member_racks=members,
        partition_racks={tp(p): frozenset({r}) for p, r in racks.items()})


def test_each_partition_goes_to_the_member_in_its_replicas_rack() -> None:
    out = uniform_assignor(spec({"m1": "a", "m2": "b"}, {0: "a", 1: "b", 2: "a", 3: "b"}))
    assert out == {"m1": frozenset({tp(0), tp(2)}), "m2": frozenset({tp(1), tp(3)})}


def test_racks_come_before_stickiness() -> None:
    current = {"m1": frozenset({tp(1), tp(3)}), "m2": frozenset({tp(0), tp(2)})}
    out = uniform_assignor(spec({"m1": "a", "m2": "b"}, {0: "a", 1: "b", 2: "a", 3: "b"},
                                current))
    assert out == {"m1": frozenset({tp(0), tp(2)}), "m2": frozenset({tp(1), tp(3)})}


def test_balance_comes_before_racks() -> None:
    # three of four partitions live in rack a, whose one member cannot take them all
    out = uniform_assignor(spec({"m1": "a", "m2": "b"}, {0: "a", 1: "a", 2: "a", 3: "b"}))
    assert sorted(len(v) for v in out.values()) == [2, 2]
    assert tp(3) in out["m2"]


def test_racks_that_cannot_matter_leave_the_plain_assignor() -> None:
    plain = uniform_assignor(spec({"m1": None, "m2": None}, {}))
    # every partition on the same racks: no member is nearer than another
    same = spec({"m1": "a", "m2": "b"}, {0: "a", 1: "a", 2: "a", 3: "a"})
    assert not uses_racks(same, [tp(p) for p in range(4)])
    assert uniform_assignor(same) == plain
    # member racks that hold no replica
    elsewhere = spec({"m1": "x", "m2": "y"}, {0: "a", 1: "b", 2: "a", 3: "b"})
    assert not uses_racks(elsewhere, [tp(p) for p in range(4)])
    assert uniform_assignor(elsewhere) == plain


@st.composite
def specs(draw: st.DrawFn) -> AssignmentSpec:
    n = draw(st.integers(1, 5))
    members = {f"m{i}": draw(st.sampled_from([None, "a", "b", "c"])) for i in range(n)}
    counts = {T: draw(st.integers(0, 9)), U: draw(st.integers(0, 5))}
    subs = {m: frozenset(draw(st.sets(st.sampled_from([T, U]), min_size=1))) for m in members}
    racks = {tp(p, t): frozenset(draw(st.sets(st.sampled_from("abc"), max_size=2)))
             for t, c in counts.items() for p in range(c)}
    every = sorted(racks, key=str)
    current = {m: frozenset(draw(st.sets(st.sampled_from(every), max_size=3)) if every else ())
               for m in members}
    return AssignmentSpec(subs, counts, current, members, racks)


@settings(max_examples=120, deadline=None)
@given(specs())
def test_every_partition_to_one_subscriber_and_loads_as_even_as_without_racks(
        s: AssignmentSpec) -> None:
    out = uniform_assignor(s)
    owners: dict[tuple[uuid.UUID, int], list[str]] = {}
    for m, ps in out.items():
        for p in ps:
            assert p[0] in s.subscriptions[m], (m, p)
            owners.setdefault(p, []).append(m)
    wanted = {tp(p, t) for t, c in s.partition_counts.items() for p in range(c)
              if any(t in subs for subs in s.subscriptions.values())}
    assert set(owners) == wanted and all(len(v) == 1 for v in owners.values())
    plain = uniform_assignor(AssignmentSpec(s.subscriptions, s.partition_counts,
                                            s.current_target))
    if len({frozenset(v) for v in s.subscriptions.values()}) == 1:  # same subscriptions
        loads = [len(v) for v in out.values()]
        assert max(loads) - min(loads) <= 1
        assert sorted(loads) == sorted(len(v) for v in plain.values())
    assert uniform_assignor(s) == out  # deterministic


def test_the_core_hands_the_members_racks_and_the_replicas_racks_to_the_assignor() -> None:
    c = ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=45_000,
                                            heartbeat_interval_ms=1_000))
    topics = {"t": rec.TopicMetadata(T, "t", 4, (frozenset({"a"}), frozenset({"b"}),
                                                 frozenset({"a"}), frozenset({"b"})))}

    def join(member: str, rack: str) -> None:
        c.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=10_000, rack_id=rack,
                              subscribed_topic_names=("t",), owned=frozenset()), topics, 0)

    join("m1", "b")
    join("m2", "a")
    g = c.groups["g"]
    assert g.target == {"m1": frozenset({tp(1), tp(3)}), "m2": frozenset({tp(0), tp(2)})}
    # the racks are not part of the stored topic metadata (Kafka 4 stores none)
    assert rec.TopicMetadata(T, "t", 4) == topics["t"]
