"""The streaming reader's driver-side decisions (what Spark asks between micro-batches), called
directly against a real broker: admission control, availableNow target, new partitions."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from spark_helpers import create_topic, produce

from floodmark.spark.offsets import TopicPartition, rate_limit
from floodmark.spark.source import FloodmarkStreamReader

pytestmark = pytest.mark.integration


def _reader(bs: str, topic: str, **opts: str) -> FloodmarkStreamReader:
    return FloodmarkStreamReader({"kafka.bootstrap.servers": bs, "subscribe": topic,
                                  "startingOffsets": "earliest", **opts})


def test_min_offsets_per_trigger_holds_back_then_admits(broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, 5, partitions=1)
    r = _reader(bs, topic_name, minOffsetsPerTrigger="20", maxTriggerDelay="1h")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMinRows(20)
    start = r.initialOffset()
    assert start == {topic_name: {"0": 0}}
    assert r.latestOffset(start, limit) == start  # 5 < 20: no batch
    produce(bs, topic_name, 20, partitions=1, start=5)
    assert r.latestOffset(start, limit) == {topic_name: {"0": 25}}


def test_max_trigger_delay_fires_below_the_minimum(broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, 5, partitions=1)
    r = _reader(bs, topic_name, minOffsetsPerTrigger="20", maxTriggerDelay="0ms")
    start = r.initialOffset()
    assert r.latestOffset(start, r.getDefaultReadLimit()) == {topic_name: {"0": 5}}


def test_max_offsets_per_trigger_and_available_now_target(broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    produce(bs, topic_name, 90, partitions=3)
    r = _reader(bs, topic_name, maxOffsetsPerTrigger="40")
    r.prepareForTriggerAvailableNow()
    produce(bs, topic_name, 30, partitions=3, start=90)  # after the target: not in this run
    limit = r.getDefaultReadLimit()
    assert limit == ReadMaxRows(40)
    cur = r.initialOffset()
    sizes = []
    for _ in range(10):
        nxt = r.latestOffset(cur, limit)
        n = sum(nxt[topic_name][p] - cur[topic_name][p] for p in nxt[topic_name])
        if n == 0:
            break
        sizes.append(n)
        assert len(r.partitions(cur, nxt)) <= 3
        cur = nxt
    assert sizes == [40, 40, 10]
    assert cur == {topic_name: {"0": 30, "1": 30, "2": 30}}
    # reportLatestOffset shows the high watermarks, beyond the availableNow target
    assert r.reportLatestOffset() == {topic_name: {"0": 40, "1": 40, "2": 40}}
    # a plain reader admits everything
    plain = _reader(bs, topic_name)
    assert plain.latestOffset(plain.initialOffset(), ReadAllAvailable()) == \
        {topic_name: {"0": 40, "1": 40, "2": 40}}


def test_rate_limit_is_exact_and_proportional() -> None:
    a, b, c = (TopicPartition("t", i) for i in range(3))
    start = {a: 0, b: 100, c: 7}
    latest = {a: 1000, b: 100, c: 57}
    out = rate_limit(start, latest, 101)
    assert sum(out[tp] - start[tp] for tp in out) == 101
    assert out[b] == 100 and out[a] - 0 > out[c] - 7 > 0
    assert rate_limit(start, latest, 10_000) == latest
    # truncated partition (HW below start) goes back to its HW even under a limit
    back = rate_limit({a: 0, b: 100}, {a: 1000, b: 40}, 10)
    assert back == {a: 10, b: 40}
