"""Driver side: which partitions, where ranges start and end, data-loss checks, read limits.

Everything here asks the broker over the Kafka protocol. The end of every range is the partition's
high watermark (or LSO under read_committed), never the log end offset, so a query only ever reads
committed records that no future leader can truncate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from floodmark.client import FetchClient, OffsetBounds
from floodmark.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from floodmark.spark.fetcher import data_loss
from floodmark.spark.options import Offsets, OffsetSpec, OptionError, Subscription

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int


def discover(client: FetchClient, sub: Subscription) -> list[TopicPartition]:
    """The topic-partitions a subscription covers right now."""
    if sub.kind == "assign":
        return [TopicPartition(t, p) for t, p in sub.assigned]
    if sub.kind == "subscribe":
        md = client.refresh_metadata(list(sub.topics))
        return [TopicPartition(t, p) for t in sub.topics for p in md.get(t, [])]
    md = client.refresh_metadata(None)
    # internal topics (__consumer_offsets, exactly-once sink markers) never match a pattern
    return [TopicPartition(t, p) for t in sorted(md)
            if not t.startswith("__") and sub.matches(t) for p in md[t]]


def current_bounds(client: FetchClient, tps: list[TopicPartition]) -> dict[TopicPartition, OffsetBounds]:
    return {tp: client.bounds(tp.topic, tp.partition) for tp in tps}


def to_json(offsets: dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for tp in sorted(offsets, key=lambda x: (x.topic, x.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(offsets: Offsets) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


def resolve(
    client: FetchClient,
    spec: OffsetSpec,
    tps: list[TopicPartition],
    bounds: dict[TopicPartition, OffsetBounds],
    isolation_level: int,
    *,
    what: str,
    timestamp_strategy: str = "error",
) -> dict[TopicPartition, int]:
    """Concrete offsets for an earliest/latest/JSON/timestamp spec."""
    out: dict[TopicPartition, int] = {}
    if spec.kind == "json":
        named = {(t, int(p)) for t, p, _ in spec.offsets}
        missing = named - {(tp.topic, tp.partition) for tp in tps}
        if missing:
            raise OptionError(f"{what} names partitions that are not assigned/subscribed or do not "
                              f"exist: {sorted(missing)}")
    for tp in tps:
        b = bounds[tp]
        end = b.end_for(isolation_level)
        if spec.kind == "earliest":
            out[tp] = b.log_start_offset
        elif spec.kind == "latest":
            out[tp] = end
        elif spec.kind == "json":
            v = spec.lookup(tp.topic, tp.partition)
            if v is None:
                if what == "startingOffsets":
                    raise OptionError(f"startingOffsets does not name {tp.topic}-{tp.partition}")
                v = LATEST_TIMESTAMP
            out[tp] = b.log_start_offset if v == EARLIEST_TIMESTAMP else end if v == LATEST_TIMESTAMP else v
        else:
            ts = spec.timestamp if spec.kind == "timestamp" else spec.lookup(tp.topic, tp.partition)
            if ts is None:
                raise OptionError(f"{what} by timestamp does not name {tp.topic}-{tp.partition}")
            off = client.list_offset(tp.topic, tp.partition, ts)
            if off < 0:
                if timestamp_strategy == "error" and what.startswith("starting"):
                    raise OptionError(f"No offset of {tp.topic}-{tp.partition} has a timestamp "
                                      f">= {ts}; set startingOffsetsByTimestampStrategy=latest "
                                      "to start from the latest offset instead")
                off = end
            out[tp] = min(off, end)
    return out


def check_start(
    tp: TopicPartition, start: int, bounds: OffsetBounds, fail_on_data_loss: bool
) -> int:
    """Where reading of ``tp`` can begin; reports data loss when ``start`` fell off the log."""
    if start < bounds.log_start_offset:
        data_loss(f"Offsets [{start}, {bounds.log_start_offset}) of {tp.topic}-{tp.partition} are "
                  f"gone: the log start offset is now {bounds.log_start_offset}",
                  fail_on_data_loss)
        return bounds.log_start_offset
    return start


def earliest(client: FetchClient, tp: TopicPartition) -> int:
    return client.list_offset(tp.topic, tp.partition, EARLIEST_TIMESTAMP)


def rate_limit(
    start: dict[TopicPartition, int], latest: dict[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """Spread ``max_rows`` over partitions in proportion to their lag (Spark's Kafka rule).

    Exactly ``min(max_rows, total lag)`` offsets are admitted: proportional shares are rounded
    down and the leftover is handed out one by one to the partitions with the most lag left.
    """
    lag = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(lag.values())
    if total <= max_rows:
        return dict(latest)
    take = {tp: (max_rows * n) // total for tp, n in lag.items()}
    left = max_rows - sum(take.values())
    order = sorted(lag, key=lambda tp: (-(lag[tp] - take[tp]), tp.topic, tp.partition))
    i = 0
    while left > 0 and i < 10 * len(order) + 10:
        tp = order[i % len(order)]
        if take[tp] < lag[tp]:
            take[tp] += 1
            left -= 1
        i += 1
    # a partition whose HW went below its start (truncation, failOnDataLoss=false) goes back
    # to the HW, as without a limit
    return {tp: latest[tp] if tp not in start or latest[tp] < start[tp] else start[tp] + take[tp]
            for tp in latest}
