"""Rack-aware replica placement (KIP-36, ``controller.placement``) for any rack layout.

For every layout of brokers over racks (some brokers without a rack too: they count as one rack
of their own), every replication factor up to the number of brokers and any starting point:

* each partition's replicas are distinct brokers of the layout, as many as the factor;
* no rack holds two replicas of a partition while a rack without one remains: a partition
  spans min(replication factor, racks) racks;
* leaders (first replicas) of one placement are balanced: no broker leads more than one
  partition more than any other;
* without any rack the placement is floodmark's round-robin from before racks (consecutive
  brokers by id), so clusters without racks and the simulator's seeds place as they did;
* the controller places CreateTopics and CreatePartitions by this rule over the acceptable
  brokers.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.placement import (
    mixed_racks,
    place_replicas,
    rack_alternated,
    topic_start,
)
from floodmark.errors import ErrorCode, KafkaError

EXAMPLES = int(os.environ.get("FLOODMARK_PROPERTY_EXAMPLES", "150"))

RACK_NAMES = st.sampled_from(["a", "b", "c", "d", "zone-1", "zone-2"])


@st.composite
def layouts(draw: st.DrawFn, allow_unnamed: bool = True) -> dict[int, str | None]:
    """Broker id -> rack (None: no broker.rack), 1 to 12 brokers with arbitrary ids."""
    ids = draw(st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True))
    rack = st.one_of(st.none(), RACK_NAMES) if allow_unnamed else RACK_NAMES
    return {b: draw(rack) for b in ids}


@st.composite
def placements(draw: st.DrawFn) -> tuple[dict[int, str | None], int, int, int, int]:
    racks = draw(layouts())
    rf = draw(st.integers(1, len(racks)))
    return racks, draw(st.integers(0, 30)), draw(st.integers(1, 60)), rf, draw(st.integers(0, 500))


@settings(max_examples=EXAMPLES, deadline=None)
@given(placements())
def test_replicas_spread_over_racks_before_any_rack_repeats(
        case: tuple[dict[int, str | None], int, int, int, int]) -> None:
    racks, first, count, rf, start = case
    placed = place_replicas(racks, first, count, rf, start)
    assert len(placed) == count
    rack_count = len(set(racks.values()))
    for replicas in placed:
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert set(replicas) <= set(racks)
        spanned = {racks[b] for b in replicas}
        assert len(spanned) == min(rf, rack_count), (racks, replicas)
        # The order itself: a rack repeats only after every rack holds a replica.
        seen: set[str | None] = set()
        for b in replicas:
            assert racks[b] not in seen or len(seen) == rack_count, (racks, replicas)
            seen.add(racks[b])


@settings(max_examples=EXAMPLES, deadline=None)
@given(placements())
def test_leaders_are_balanced_within_one_per_broker(
        case: tuple[dict[int, str | None], int, int, int, int]) -> None:
    racks, first, count, rf, start = case
    leaders = Counter(replicas[0] for replicas in place_replicas(racks, first, count, rf, start))
    per_broker = [leaders.get(b, 0) for b in racks]
    assert max(per_broker) - min(per_broker) <= 1, (racks, leaders)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True), st.data())
def test_without_racks_placement_is_the_round_robin_of_before(ids: list[int],
                                                                data: st.DataObject) -> None:
    live = sorted(ids)
    rf = data.draw(st.integers(1, len(live)))
    first, count, start = (data.draw(st.integers(0, 30)), data.draw(st.integers(1, 40)),
                           data.draw(st.integers(0, 500)))
    placed = place_replicas(dict.fromkeys(ids), first, count, rf, start)
    assert placed == [tuple(live[(start + i + k) % len(live)] for k in range(rf))
                      for i in range(first, first + count)]


@settings(max_examples=EXAMPLES, deadline=None)
@given(layouts())
def test_rack_alternated_order_takes_one_broker_of_each_rack_in_turn(
        racks: dict[int, str | None]) -> None:
    order = rack_alternated(racks)
    assert sorted(order) == sorted(racks)
    by_rack: dict[str | None, list[int]] = {}
    for b in order:
        by_rack.setdefault(racks[b], []).append(b)
    for brokers in by_rack.values():
        assert brokers == sorted(brokers)  # within a rack: by id
    # Any prefix holds as many brokers of each rack as it can: counts differ by at most one
    # among the racks that still have brokers left.
    for n in range(1, len(order) + 1):
        counts = Counter(racks[b] for b in order[:n])
        sizes = Counter(racks.values())
        open_racks = [r for r in sizes if counts[r] < sizes[r]]
        if open_racks:
            assert max(counts[r] for r in sizes) - min(counts[r] for r in open_racks) <= 1


def test_examples_from_the_docs() -> None:
    racks: dict[int, str | None] = {1: "a", 4: "a", 5: "a", 2: "b", 3: "c"}
    assert rack_alternated(racks) == [1, 2, 3, 4, 5]
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "b"}) == [1, 3, 2, 4]
    # Broker 4 leads (rack a): its followers are the brokers of racks b and c.
    assert place_replicas(racks, 3, 1, 3, 0) == [(4, 2, 3)]
    assert mixed_racks({1: "a", 2: None, 3: None}) == [2, 3]
    assert mixed_racks({1: None, 2: None}) == []


@pytest.mark.parametrize("rf", [0, -1, 4])
def test_impossible_factors_are_kafkas_invalid_replication_factor(rf: int) -> None:
    with pytest.raises(KafkaError) as err:
        place_replicas({1: "a", 2: "b", 3: "c"}, 0, 1, rf, 0)
    assert err.value.code is ErrorCode.INVALID_REPLICATION_FACTOR


# -- the controller places by the rule ------------------------------------------------------------
def _logic(racks: dict[int, str | None]) -> ControllerLogic:
    logic = ControllerLogic(MetadataImage(), ControllerConfig())
    logic.bootstrap()
    for b, rack in sorted(racks.items()):
        logic.register_broker(b, "127.0.0.1", 9000 + b, f"inc-{b}", 0, rack=rack)
    return logic


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None)
@given(layouts(), st.data())
def test_controller_creates_topics_and_partitions_by_the_rule(racks: dict[int, str | None],
                                                              data: st.DataObject) -> None:
    logic = _logic(racks)
    rf = data.draw(st.integers(1, len(racks)))
    created, added = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    logic.create_topic("events", created, rf, {})
    logic.create_partitions("events", created + added)
    timage = logic.image.topics["events"]
    replicas = [timage.partitions[p].replicas for p in range(created + added)]
    start = topic_start("events")
    assert replicas == (place_replicas(racks, 0, created, rf, start)
                        + place_replicas(racks, created, added, rf, start))
    for p in range(created + added):
        reg = timage.partitions[p]
        assert reg.leader == reg.replicas[0] and reg.isr == reg.replicas


def test_controller_places_only_on_acceptable_brokers() -> None:
    logic = _logic({1: "a", 2: "a", 3: "b", 4: "b"})
    logic.fence_broker(3, "test")
    logic.create_topic("t", 6, 2, {})
    for reg in logic.image.topics["t"].partitions.values():
        assert 3 not in reg.replicas
        assert {logic.image.brokers[b].rack for b in reg.replicas} == {"a", "b"}
    with pytest.raises(KafkaError) as err:
        logic.create_topic("u", 1, 4, {})
    assert err.value.code is ErrorCode.INVALID_REPLICATION_FACTOR


def test_mixed_racks_place_the_unnamed_brokers_as_one_rack_and_say_so(
        caplog: pytest.LogCaptureFixture) -> None:
    logic = _logic({1: "a", 2: "b", 3: None, 4: None})
    logic.create_topic("t", 4, 3, {})
    for reg in logic.image.topics["t"].partitions.values():
        assert len({logic.image.brokers[b].rack for b in reg.replicas}) == 3
    assert "broker(s) [3, 4] have no broker.rack while others have one" in caplog.text
