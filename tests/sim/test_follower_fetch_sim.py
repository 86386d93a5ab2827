"""KIP-392 in the simulator: a consumer reading from a follower in its rack never gets a record
that was not committed (below a leader's HW) when it was served, and its position never moves
back, while the leadership moves and the follower dies, restarts and loses its tail.

* the ``follower-fetch-leader-moves`` scenario, step by step (its history is also checked in
  every mode by ``test_scenarios``);
* the same scenario with a broken read rule (followers serving up to their log end) is caught;
* the explorer's random fault schedules with ``follower_fetching`` (racks, the selector, the
  consumer in broker 2's rack) find nothing, with transactions too (the consumer then reads
  read_committed: a follower's LSO bounds it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from floodmark.errors import ErrorCode
from floodmark.replication import reads
from floodmark.replication.modes import Truncation
from floodmark.sim.partition.explore import ExploreOptions, Nemesis, _run, build_cluster
from floodmark.sim.partition.scenarios import run_scenario

NAME = "follower-fetch-leader-moves"


def test_scenario_reads_from_the_follower_and_falls_back_to_the_leader() -> None:
    result = run_scenario(NAME, Truncation.LEADER_EPOCH)
    assert result.as_expected, result.verdict
    facts = result.facts
    assert facts["follower_records_served"] >= 5
    assert facts["consumer_read"] == [f"p{i}" for i in range(10)]
    assert facts["back_to_leader"] == ["FENCED_LEADER_EPOCH", "no answer", "no answer",
                                       "OFFSET_OUT_OF_RANGE"]
    # Above the follower's own HW (p5 in its log, not yet committed): nothing, and no error.
    assert facts["reads"][4] == [] and facts["reads"][5] == ["p5"]


def test_a_follower_serving_past_its_high_watermark_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rule = reads.read_bound

    def to_log_end(partition: Any, log: Any, *args: Any, **kwargs: Any) -> reads.ReadBound:
        bound = rule(partition, log, *args, **kwargs)
        if (not partition.is_leader and bound.error is ErrorCode.NONE
                and bound.preferred_read_replica < 0):
            return dataclasses.replace(bound, read_upto=log.log_end_offset)
        return bound

    monkeypatch.setattr(reads, "read_bound", to_log_end)
    result = run_scenario(NAME, Truncation.LEADER_EPOCH)
    assert not result.as_expected
    assert any("served p5@5" in v for v in result.facts["follower_violations"])


def _explore(seeds: range, *, transactions: bool = False
             ) -> tuple[int, list[tuple[int, str, str]]]:
    options = ExploreOptions(follower_fetching=True, transactions=transactions)
    served = 0
    found: list[tuple[int, str, str]] = []
    for seed in seeds:
        cluster = build_cluster(seed, options)
        cluster.boot()
        _run(cluster, Nemesis(cluster, options), options)
        assert cluster.follower_reads is not None
        served += cluster.follower_reads.records_served
        found += [(seed, v.invariant, v.detail) for v in cluster.checker.violations]
    return served, found


def test_explorer_with_follower_fetching_finds_nothing() -> None:
    served, found = _explore(range(3))
    assert not found, found[:3]
    assert served > 0


def test_read_committed_from_a_follower_finds_nothing() -> None:
    """With transactions the consumer reads read_committed: a follower serves below its own
    LSO, and the explorer's read-committed checks hold for what it serves."""
    served, found = _explore(range(200, 202), transactions=True)
    assert not found, found[:3]
    assert served > 0


@pytest.mark.slow
def test_explorer_with_follower_fetching_finds_nothing_in_40_seeds() -> None:
    served, found = _explore(range(100, 140))
    assert not found, found[:3]
    assert served > 1000
    served, found = _explore(range(300, 320), transactions=True)
    assert not found, found[:3]
    assert served > 500
