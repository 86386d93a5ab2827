"""A new leader does not shrink the ISR for a follower that has not fetched yet before
``replica.lag.time.max.ms`` has passed since it became leader, as Kafka: ``resetReplicaState``
sets an in-ISR follower's ``lastCaughtUpTimeMs`` to the election time (its log end unknown), and
``getOutOfSyncReplicas`` keeps a follower while ``now - lastCaughtUpTimeMs <= replicaMaxLagMs``.
Here the grace starts again when the leader's epoch start is durable (its followers could not
fetch before). After the grace the silent follower goes; one that fetched stays."""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.replication.election import PartitionRegistration
from floodmark.replication.epochs import EpochCache
from floodmark.replication.partition import (
    AssignEpoch,
    Effect,
    FollowerFetch,
    Partition,
    PartitionConfig,
    ProposeIsr,
)

LAG_MS = 10_000
LEADER, EPOCH = 1, 5
ELECTED_MS = 50_000


@dataclass
class Log:
    log_end_offset: int = 0
    log_start_offset: int = 0
    epoch_cache: EpochCache = field(default_factory=EpochCache)


def leader(replicas: tuple[int, ...], isr: tuple[int, ...], leo: int,
           now_ms: int) -> tuple[Partition, Log]:
    log = Log(leo)
    p = Partition(PartitionConfig("t", 0, LEADER, 1, LAG_MS))
    for effect in p.apply_metadata(log, PartitionRegistration(replicas, isr, LEADER, EPOCH, 0),
                                   now_ms):
        if isinstance(effect, AssignEpoch):
            log.epoch_cache.assign(effect.epoch, effect.start_offset)
    return p, log


def fetch(replica: int, offset: int) -> FollowerFetch:
    return FollowerFetch(replica, offset, EPOCH, EPOCH, 0)


def _shrinks(effects: list[Effect]) -> list[tuple[int, ...]]:
    return [e.request.new_isr for e in effects if isinstance(e, ProposeIsr)]


def test_a_follower_that_never_fetched_keeps_its_place_for_the_lag_time() -> None:
    p, log = leader((1, 2, 3), (1, 2, 3), leo=0, now_ms=ELECTED_MS)  # a new, empty partition
    for now in range(ELECTED_MS + 500, ELECTED_MS + LAG_MS + 1, 500):
        p.handle_follower_fetch(log, fetch(2, 0), now)  # 2 fetches; 3 has not opened its log
        assert p.maybe_shrink_isr(log, now) == [], now
    assert _shrinks(p.maybe_shrink_isr(log, ELECTED_MS + LAG_MS + 1)) == [(1, 2)]


def test_the_grace_counts_from_the_durable_epoch_start() -> None:
    p, log = leader((1, 2, 3), (1, 2, 3), leo=0, now_ms=ELECTED_MS)
    p.epoch_start_pending(EPOCH)
    durable_ms = ELECTED_MS + 2 * LAG_MS  # the checkpoint batch took long (a loaded disk)
    assert p.maybe_shrink_isr(log, durable_ms - 1) == []  # no shrink before it is durable
    p.epoch_start_durable(EPOCH, durable_ms)
    assert p.maybe_shrink_isr(log, durable_ms + LAG_MS) == []
    assert _shrinks(p.maybe_shrink_isr(log, durable_ms + LAG_MS + 1)) == [(1,)]
