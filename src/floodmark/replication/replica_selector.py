"""Which replica a consumer should read from (KIP-392, Kafka's ``ReplicaSelector``).

The leader decides, on each consumer Fetch (v11+, which carries the client's ``rack_id``), with
``replica.selector.class``:

* unset: always the leader (nothing changes for clients);
* ``org.apache.kafka.common.replica.RackAwareReplicaSelector``: a replica in the client's rack.
  If the leader is in that rack, the leader; else the most caught-up in-sync follower there
  (the highest log end offset, then the most recently caught up, then the highest broker id,
  Kafka's ``ReplicaView.comparator``); no replica in that rack, or no rack given: the leader.

Only in-sync followers that hold ``fetch_offset`` (log start <= offset <= log end, as the
leader last saw them) and that have an endpoint on the client's listener (a live broker) are
candidates, as in Kafka's ``ReplicaManager.findPreferredReadReplica``: an out-of-sync follower
may lag for good, and the consumer would fall further behind on every metadata refresh.
One more than Kafka: a follower whose last fetch came from an older incarnation of its broker
(it re-registered since, with a new broker epoch, KIP-903) is no candidate until it fetches
again; it may have restarted without its unflushed tail, and would answer the consumer
OFFSET_OUT_OF_RANGE (found by the simulator scenario ``follower-fetch-leader-moves``).

Pure: the caller passes the racks of the live brokers and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from floodmark.replication.partition import LeaderState, Partition


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate, as the leader sees it (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def rack_aware_select(client_rack: str | None, leader: ReplicaView,
                      followers: tuple[ReplicaView, ...]) -> int:
    """Kafka's ``RackAwareReplicaSelector.select``: the broker id to read from."""
    if not client_rack:
        return leader.broker_id
    if leader.rack == client_rack:
        return leader.broker_id
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return leader.broker_id
    best = max(same_rack, key=lambda f: (f.log_end_offset, -f.time_since_last_caught_up_ms,
                                         f.broker_id))
    return best.broker_id


@dataclass(frozen=True, slots=True)
class ReplicaSelection:
    """What a consumer Fetch brings to the choice: the client's rack (Fetch v11+ ``rack_id``),
    the racks of the brokers that have an endpoint on the client's listener (live ones; None:
    no rack), and the time."""

    client_rack: str
    broker_racks: Mapping[int, str | None]
    now_ms: int


def preferred_read_replica(partition: Partition, leader_log_end_offset: int, fetch_offset: int,
                           selection: ReplicaSelection) -> int:
    """The replica this leader tells the consumer to read from (``preferred_read_replica``),
    or -1 for this leader itself, and on any replica that is not the leader (a follower never
    redirects: the consumer came because the leader sent it)."""
    role = partition.role
    if not isinstance(role, LeaderState):
        return -1
    me = partition.config.broker_id
    racks = selection.broker_racks
    leader = ReplicaView(me, racks.get(me), leader_log_end_offset, 0)
    isr = role.isr_state.isr
    followers: list[ReplicaView] = []
    for replica_id in role.replicas:
        if replica_id == me or replica_id not in isr or replica_id not in racks:
            continue
        state = partition.replica_states.get(replica_id)
        if state is None or not state.log_start_offset <= fetch_offset <= state.log_end_offset:
            continue
        registered = partition.broker_epochs.get(replica_id, -1)
        if -1 < state.broker_epoch < registered:
            continue  # what it fetched was before it restarted: its log may be shorter now
        followers.append(ReplicaView(replica_id, racks[replica_id], state.log_end_offset,
                                     selection.now_ms - state.last_caught_up_time_ms))
    chosen = rack_aware_select(selection.client_rack, leader, tuple(followers))
    return -1 if chosen == me else chosen
