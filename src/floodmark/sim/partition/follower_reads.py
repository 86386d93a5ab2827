"""KIP-392's promise, checked on every consumer read a follower serves in the simulator.

A follower serves consumers up to its own high watermark, which it learned from a leader, so
every record it returns must already be committed: below the HW some leader reached, with the
same value (``Checker.commit_epoch`` remembers each (offset, value) a leader's HW passed, at the
moment it passed). ``FollowerReadCheck.on_served`` flags a follower read of a record that was
not committed at that moment.

With ``flag`` (the explorer), each violation is also reported to the run's ``Checker``
(invariant ``follower-read-committed``), and so is any move back of the consumer's position
(``consumer-position-monotonic``, ``Consumer.went_back``), seen at the next read served.

It also counts the reads above the *current* leader's HW. Those are not violations: right
after an election the new leader's HW may still be below the one the old leader had reached
and told its followers (it learns it with its followers' next fetches, KIP-207); the records
between are committed all the same. The count shows how often a run met that window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from floodmark.sim.partition.broker import SimBroker
from floodmark.sim.partition.checker import Checker
from floodmark.sim.partition.clients import Consumer


class ReadHost(Protocol):
    """What the check sees of its cluster (``cluster.Cluster``)."""

    racks: dict[int, str]
    follower_reads: FollowerReadCheck | None
    brokers: list[SimBroker]

    @property
    def checker(self) -> Checker: ...

    @property
    def consumer(self) -> Consumer: ...

    def leader(self) -> SimBroker | None: ...


@dataclass(slots=True)
class FollowerReadCheck:
    flag: bool = False
    """Report violations to the cluster's ``Checker`` too."""
    records_served: int = 0
    """Records followers returned to consumers."""
    above_current_leader_hw: int = 0
    """Of those, records at or above the HW of the broker leading at that moment (committed
    by an earlier leader: the KIP-207 window)."""
    violations: list[str] = field(default_factory=list)
    moves_back_seen: int = 0

    def on_served(self, cluster: ReadHost, broker: SimBroker,
                  records: tuple[tuple[int, int, str], ...]) -> None:
        consumer = cluster.consumer
        if self.flag and len(consumer.went_back) > self.moves_back_seen:
            for detail in consumer.went_back[self.moves_back_seen:]:
                cluster.checker.flag("consumer-position-monotonic", detail)
            self.moves_back_seen = len(consumer.went_back)
        p = broker.partition
        if p is None or p.is_leader or not records:
            return
        leader = cluster.leader()
        leader_hw = (leader.partition.high_watermark
                     if leader is not None and leader.partition is not None else -1)
        committed = cluster.checker.commit_epoch
        for offset, _epoch, value in records:
            self.records_served += 1
            if offset >= leader_hw:
                self.above_current_leader_hw += 1
            if (offset, value) not in committed:
                detail = (f"follower {broker.name} (HW {p.high_watermark}) served "
                          f"{value}@{offset}, not below any leader's HW (current leader's HW "
                          f"{leader_hw})")
                self.violations.append(detail)
                if self.flag:
                    cluster.checker.flag("follower-read-committed", detail)


def enable_follower_fetching(cluster: ReadHost, consumer_rack_of: int = 2
                             ) -> FollowerReadCheck:
    """Turn a simulated cluster into KIP-392's: every broker in its own rack (``r<id>``), the
    rack-aware selector on, and the consumer in broker ``consumer_rack_of``'s rack (it reads
    from that broker while it follows, from the leader otherwise); returns the check, which
    reports to the cluster's ``Checker``."""
    cluster.racks = {b.broker_id: f"r{b.broker_id}" for b in cluster.brokers}
    cluster.consumer.rack = cluster.racks[consumer_rack_of]
    check = cluster.follower_reads = FollowerReadCheck(flag=True)
    return check
