"""KIP-848's server-side assignors: ``uniform`` (the default) and ``range``, as pure functions.

An assignor maps each member to the partitions it should own (the *target assignment*); it
never decides when a partition moves: the reconciliation in ``reconcile`` does (a partition
goes to its new owner only after the previous owner revoked it). Both assignors are sticky
where they can be: ``uniform`` keeps every partition with its current target owner while that
owner is still subscribed and under its fair share, and moves the fewest partitions needed to
balance; ``range`` gives each member a contiguous range of each topic it subscribes to, as the
classic ``RangeAssignor`` does (members sorted by member id).

``uniform`` is rack-aware when the members say where they are (``client.rack``, KIP-881's rack
id in the heartbeat) and the partitions' replicas are on racks (``broker.rack``): a partition
goes to a member in a rack that holds one of its replicas when one has room, so a consumer can
fetch from the replica next to it (KIP-392). The order of priorities is balance, then racks,
then stickiness: racks never unbalance the loads, and a current owner in a rack without a
replica gives the partition up to a member in the right rack. Rack awareness applies only when
it can matter: some member rack is a replica rack, and not every partition has the same racks
(then no member is nearer than another). Kafka 4.1's server-side ``uniform`` assignor is not
rack-aware (removed for 3.8 as too slow, KAFKA-16694; KAFKA-19909 proposes it back with these
priorities).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicPartition = tuple[uuid.UUID, int]
Partitions = frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """What an assignor sees: each member's subscribed topic ids, each topic's partition
    count, and the current target (for stickiness); for rack awareness each member's rack and
    the racks of each partition's replicas (missing: unknown)."""

    subscriptions: Mapping[str, frozenset[uuid.UUID]]  # member id -> subscribed topic ids
    partition_counts: Mapping[uuid.UUID, int]  # topic id -> number of partitions
    current_target: Mapping[str, Partitions]  # member id -> its current target partitions
    member_racks: Mapping[str, str | None] = field(default_factory=dict)
    partition_racks: Mapping[TopicPartition, frozenset[str]] = field(default_factory=dict)


Assignor = Callable[[AssignmentSpec], dict[str, Partitions]]


def _subscribers(spec: AssignmentSpec) -> dict[uuid.UUID, list[str]]:
    out: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(spec.subscriptions):
        for topic_id in spec.subscriptions[member_id]:
            if spec.partition_counts.get(topic_id, 0) > 0:
                out.setdefault(topic_id, []).append(member_id)
    return out


def range_assignor(spec: AssignmentSpec) -> dict[str, Partitions]:
    """Per topic: its subscribers sorted by member id, partitions in contiguous ranges, the
    first ``count % subscribers`` members one partition more."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    for topic_id, members in _subscribers(spec).items():
        count = spec.partition_counts[topic_id]
        share, extra = divmod(count, len(members))
        start = 0
        for i, member_id in enumerate(members):
            n = share + (1 if i < extra else 0)
            out[member_id].update((topic_id, p) for p in range(start, start + n))
            start += n
    return {m: frozenset(ps) for m, ps in out.items()}


def uses_racks(spec: AssignmentSpec, partitions: list[TopicPartition]) -> bool:
    """Whether racks can make a difference: a member rack that is also a replica rack, and
    partitions that do not all have the same racks."""
    member_racks = {r for m, r in spec.member_racks.items() if r and spec.subscriptions.get(m)}
    racks = [spec.partition_racks.get(tp, frozenset()) for tp in partitions]
    if not member_racks & frozenset().union(*racks):
        return False
    return any(r != racks[0] for r in racks)


def uniform_assignor(spec: AssignmentSpec) -> dict[str, Partitions]:
    """Every subscribed partition to one subscriber, loads as even as the subscriptions allow,
    then members in a replica's rack (when racks matter), then current owners kept."""
    subscribers = _subscribers(spec)
    partitions = sorted(((t, p) for t in subscribers for p in range(spec.partition_counts[t])),
                        key=lambda tp: (str(tp[0]), tp[1]))
    members = sorted(m for m in spec.subscriptions if spec.subscriptions[m])
    out: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    if not members:
        return {m: frozenset() for m in out}
    racked = uses_racks(spec, partitions)

    def near(member_id: str, tp: TopicPartition) -> bool:
        """The member is in a rack of one of the partition's replicas (always, without racks)."""
        return not racked or spec.member_racks.get(member_id) in spec.partition_racks.get(
            tp, frozenset())

    def fits(member_id: str, tp: TopicPartition) -> bool:
        """Near, or no subscriber is near (then every subscriber is as far)."""
        return near(member_id, tp) or not any(near(m, tp) for m in subscribers[tp[0]])

    # A fair share: ceil(partitions / members) bounds what stickiness may keep.
    cap = -(-len(partitions) // len(members))
    owner_of = {tp: m for m, ps in spec.current_target.items() for tp in ps}
    unassigned: list[TopicPartition] = []
    for tp in partitions:
        owner = owner_of.get(tp)
        if owner is not None and owner in out and tp[0] in spec.subscriptions[owner] \
                and len(out[owner]) < cap and fits(owner, tp):
            out[owner].add(tp)
        else:
            unassigned.append(tp)
    for tp in unassigned:
        least = min(subscribers[tp[0]],
                    key=lambda m: (len(out[m]) >= cap or not near(m, tp), len(out[m]), m))
        out[least].add(tp)
    # Balance: move a partition from the most to the least loaded member that may own it,
    # until no move narrows the gap (bounded: every move lowers the sum of squared loads).
    # Partitions away from their racks move first, and to a near member when one has room.
    for _ in range(len(partitions) * len(members)):
        moved = False
        for src in sorted(members, key=lambda m: (-len(out[m]), m)):
            for tp in sorted(out[src], key=lambda tp: (near(src, tp), str(tp[0]), tp[1])):
                dst = min((m for m in subscribers[tp[0]] if len(out[m]) + 1 < len(out[src])),
                          key=lambda m: (not near(m, tp), len(out[m]), m), default=src)
                if dst != src:
                    out[src].discard(tp)
                    out[dst].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return {m: frozenset(ps) for m, ps in out.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assignor, "range": range_assignor}
