"""Where a new partition's replicas go (KIP-36 rack-aware placement), sans-I/O.

One rule for every place the controller chooses replicas itself: CreateTopics and
CreatePartitions without an explicit assignment (an operator's assignment is taken as given, as
Kafka takes it). Any reassignment-plan generator must call the same function.

The rule (the idea of Kafka's rack-aware assignment, in floodmark's own code):

1. The brokers are laid out in a *rack-alternated* order: racks sorted by name, each rack's
   brokers sorted by id, then one broker of each rack in turn (racks a: 1 4 5, b: 2, c: 3 give
   ``1 2 3 4 5``; racks a: 1 2, b: 3 4 give ``1 3 2 4``).
2. Partition ``p``'s first replica (its preferred leader) is the broker at ``start + p`` in that
   order: leaders go round-robin over every broker, so within one placement no broker leads
   more than one partition more than any other, whatever the racks.
3. Its other replicas are the next brokers in that order, skipping a broker whose rack already
   holds a replica of the partition while some rack holds none: the replicas spread over every
   rack before any rack gets a second one. Once every rack has one, the next brokers in order
   are taken.

Brokers without ``broker.rack`` while others have one count as one rack of their own (the
unnamed rack), as Kafka's KRaft placer (``StripedReplicaPlacer``) treats them; Kafka's
ZooKeeper-era placer refused such a cluster. Without any rack the order is the brokers by id and
the rule is plain round-robin (each partition's replicas are consecutive brokers), exactly the
placement floodmark made before racks, so existing clusters and the simulator's seeded
schedules place as they did.

``start`` spreads the leaders of different topics (``topic_start``); partitions added later
continue the round-robin where the topic's numbering continues.
"""

from __future__ import annotations

from collections.abc import Mapping

from floodmark.errors import ErrorCode, KafkaError

__all__ = ["broker_rack", "mixed_racks", "place_replicas", "rack_alternated", "topic_start"]


def broker_rack(value: object) -> str | None:
    """A ``broker.rack`` value as a broker registers it: None or blank is no rack; anything but
    text is refused (ValueError, one line)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"broker.rack must be text, not {value!r}")
    return value.strip() or None


def topic_start(topic: str) -> int:
    """Where a topic's round-robin starts: different topics start at different brokers, and the
    same topic always at the same one (deterministic, so a replayed decision is identical)."""
    return sum(ord(c) for c in topic)


def _rack_key(rack: str | None) -> tuple[int, str]:
    return (0, "") if rack is None else (1, rack)  # the unnamed rack sorts first


def rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Broker ids (keys of ``racks``: broker id -> its rack or None) in rack-alternated order."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    columns = [sorted(by_rack[r]) for r in sorted(by_rack, key=_rack_key)]
    out: list[int] = []
    for row in range(max((len(c) for c in columns), default=0)):
        out.extend(c[row] for c in columns if row < len(c))
    return out


def mixed_racks(racks: Mapping[int, str | None]) -> list[int]:
    """The brokers without a rack when some other broker has one (else empty)."""
    if all(r is None for r in racks.values()):
        return []
    return sorted(b for b, r in racks.items() if r is None)


def place_replicas(racks: Mapping[int, str | None], first_partition: int, count: int,
                   replication_factor: int, start: int) -> list[tuple[int, ...]]:
    """Replicas (preferred leader first) of partitions ``first_partition`` ..
    ``first_partition + count - 1`` over the brokers of ``racks`` (broker id -> rack or None;
    the brokers replicas may be placed on). INVALID_REPLICATION_FACTOR (Kafka's error and
    wording) when the factor is not positive or above the number of brokers."""
    if replication_factor < 1:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Invalid replication factor {replication_factor}: the replication "
                         f"factor must be positive.")
    order = rack_alternated(racks)
    n = len(order)
    if replication_factor > n:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"The target replication factor of {replication_factor} cannot be "
                         f"reached because only {n} broker(s) are available.")
    rack_count = len(set(racks.values()))
    out: list[tuple[int, ...]] = []
    for p in range(first_partition, first_partition + count):
        lead = (start + p) % n
        replicas = [order[lead]]
        used = {racks[order[lead]]}
        step = 1
        while len(replicas) < replication_factor:
            # Every broker other than the leader is visited within n - 1 steps, and one of them
            # is always acceptable (rf <= n; an unused rack has an unchosen broker).
            assert step < n, (order, replicas, step)
            candidate = order[(lead + step) % n]
            rack = racks[candidate]
            if candidate not in replicas and (rack not in used or len(used) == rack_count):
                replicas.append(candidate)
                used.add(rack)
                step = 1  # the next replica: from the leader's neighbour again
            else:
                step += 1
        out.append(tuple(replicas))
    return out
