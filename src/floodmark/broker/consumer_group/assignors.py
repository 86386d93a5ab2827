"""KIP-848's server-side assignors: ``uniform`` (the default) and ``range``, as pure functions.

An assignor maps each member to the partitions it should own (the *target assignment*); it
never decides when a partition moves: the reconciliation in ``reconcile`` does (a partition
goes to its new owner only after the previous owner revoked it). Both assignors are sticky
where they can be: ``uniform`` keeps every partition with its current target owner while that
owner is still subscribed and under its fair share, and moves the fewest partitions needed to
balance; ``range`` gives each member a contiguous range of each topic it subscribes to, as the
classic ``RangeAssignor`` does (members sorted by member id).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[uuid.UUID, int]
Partitions = frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """What an assignor sees: each member's subscribed topic ids, each topic's partition
    count, and the current target (for stickiness)."""

    subscriptions: Mapping[str, frozenset[uuid.UUID]]  # member id -> subscribed topic ids
    partition_counts: Mapping[uuid.UUID, int]  # topic id -> number of partitions
    current_target: Mapping[str, Partitions]  # member id -> its current target partitions


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


def uniform_assignor(spec: AssignmentSpec) -> dict[str, Partitions]:
    """Every subscribed partition to one subscriber, loads as even as the subscriptions allow,
    current owners kept where that does not unbalance."""
    subscribers = _subscribers(spec)
    partitions = sorted(((t, p) for t in subscribers for p in range(spec.partition_counts[t])),
                        key=lambda tp: (str(tp[0]), tp[1]))
    members = sorted(m for m in spec.subscriptions if spec.subscriptions[m])
    out: dict[str, set[TopicPartition]] = {m: set() for m in spec.subscriptions}
    if not members:
        return {m: frozenset() for m in out}
    # A fair share: ceil(partitions / members) bounds what stickiness may keep.
    cap = -(-len(partitions) // len(members))
    owner_of = {tp: m for m, ps in spec.current_target.items() for tp in ps}
    unassigned: list[TopicPartition] = []
    for tp in partitions:
        owner = owner_of.get(tp)
        if owner is not None and owner in out and tp[0] in spec.subscriptions[owner] \
                and len(out[owner]) < cap:
            out[owner].add(tp)
        else:
            unassigned.append(tp)
    for tp in unassigned:
        least = min(subscribers[tp[0]], key=lambda m: (len(out[m]), m))
        out[least].add(tp)
    # Balance: move a partition from the most to the least loaded member that may own it,
    # until no move narrows the gap (bounded: every move lowers the sum of squared loads).
    for _ in range(len(partitions) * len(members)):
        moved = False
        for src in sorted(members, key=lambda m: (-len(out[m]), m)):
            for tp in sorted(out[src], key=lambda tp: (str(tp[0]), tp[1])):
                dst = min(subscribers[tp[0]], key=lambda m: (len(out[m]), m))
                if len(out[dst]) + 1 < len(out[src]):
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
