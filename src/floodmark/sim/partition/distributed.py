"""Explorer seeds as Spark tasks (``floodmark sim explore --spark MASTER``).

The same mechanism as ``sim check --spark`` (``floodmark.mc.distributed``): the driver cuts the
work into parts, each part is one Spark task that runs in a fresh Python worker, and only small
picklable summaries travel back. Here a part is a contiguous range of seeds. A seed is a pure
function of its number (the simulator is deterministic), so a seed's result does not depend on
which executor ran it: the distributed report equals the local one for the same seeds.

For seeds in the millions an executor sends back per part only the totals (seeds, acknowledged
writes, events, broker restarts) and the seeds that found something (a violation, or a loss reported outside
SPEC §4's premise), each with its fault schedule and the command that replays it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from floodmark.sim.partition.explore import ExploreOptions, ExploreReport, SeedResult, run_seed

DEFAULT_PARTS = 64


@dataclass(frozen=True, slots=True)
class PartSummary:
    """What one Spark task sends back (small and picklable)."""

    first_seed: int
    seeds: int
    acknowledged: int
    events: int
    notable: tuple[SeedResult, ...]
    restarts: int = 0


def seed_ranges(start_seed: int, seeds: int, parts: int) -> list[tuple[int, int]]:
    """``seeds`` seeds from ``start_seed`` in at most ``parts`` contiguous (first, count) ranges
    of nearly equal size, in order."""
    if seeds <= 0 or parts <= 0:
        raise ValueError("seeds and parts must be positive")
    parts = min(parts, seeds)
    base, extra = divmod(seeds, parts)
    out: list[tuple[int, int]] = []
    first = start_seed
    for i in range(parts):
        count = base + (1 if i < extra else 0)
        out.append((first, count))
        first += count
    return out


def explore_part(first_seed: int, count: int, options: ExploreOptions) -> PartSummary:
    acknowledged = events = restarts = 0
    notable: list[SeedResult] = []
    for seed in range(first_seed, first_seed + count):
        result = run_seed(seed, options)
        acknowledged += result.acknowledged
        events += result.events
        restarts += result.restarts
        if result.violations or result.reported_losses:
            notable.append(result)
    return PartSummary(first_seed, count, acknowledged, events, tuple(notable), restarts)


def merge(options: ExploreOptions, start_seed: int, seeds: int, parts: Iterable[PartSummary],
          elapsed_s: float) -> ExploreReport:
    ordered = sorted(parts, key=lambda p: p.first_seed)
    covered = sum(p.seeds for p in ordered)
    if covered != seeds:
        raise RuntimeError(f"the Spark tasks ran {covered} seeds of {seeds}")
    return ExploreReport(
        options, range(start_seed, start_seed + seeds),
        [r for p in ordered for r in p.notable], elapsed_s,
        totals=(sum(p.acknowledged for p in ordered), sum(p.events for p in ordered),
                sum(p.restarts for p in ordered)))


def explore_on_spark(seeds: int, options: ExploreOptions, master: str, *, start_seed: int = 1,
                     parts: int = DEFAULT_PARTS) -> ExploreReport:
    """``explore`` with contiguous ranges of seeds as Spark tasks on ``master``."""
    import floodmark.spark

    started = time.perf_counter()
    ranges = seed_ranges(start_seed, seeds, parts)
    session = floodmark.spark.batch_session(master, "floodmark-sim-explore")

    def run_parts(items: Iterable[tuple[int, int]]) -> Iterator[PartSummary]:
        for first, count in items:
            yield explore_part(first, count, options)

    rdd = session.sparkContext.parallelize(ranges, len(ranges))
    summaries = rdd.mapPartitions(run_parts).collect()
    return merge(options, start_seed, seeds, summaries, time.perf_counter() - started)
