"""The connector's Kafka-protocol reader without Spark: codecs written by librdkafka, bounds."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from spark_helpers import create_topic

from floodmark.client.fetch import FetchClient
from floodmark.spark.fetcher import ClientConfig, DataLossError, read_range

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_reads_every_codec_librdkafka_writes(broker, topic_name, codec: str) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                  "compression.type": codec, "linger.ms": 20})
    values = [b"value-%d-" % i + b"z" * (i % 50) for i in range(700)]
    for i, v in enumerate(values):
        p.produce(topic_name, value=v, key=None if i % 5 == 0 else b"k%d" % i, partition=0,
                  headers=[("i", str(i).encode())], timestamp=1_700_000_000_000 + i)
    assert p.flush(30) == 0

    client = FetchClient(bs)
    b = client.bounds(topic_name, 0)
    assert (b.log_start_offset, b.high_watermark) == (0, 700)
    rows = []
    for rb in read_range(ClientConfig(bs), topic_name, 0, 0, b.high_watermark,
                         include_headers=True, fail_on_data_loss=True):
        rows += rb.to_pylist()
    assert [r["offset"] for r in rows] == list(range(700))
    assert [r["value"] for r in rows] == values
    assert [r["key"] for r in rows] == [None if i % 5 == 0 else b"k%d" % i for i in range(700)]
    assert [r["headers"] for r in rows] == [[{"key": "i", "value": str(i).encode()}]
                                            for i in range(700)]
    # a sub-range starting and ending inside batches
    part = [r["offset"] for rb in read_range(ClientConfig(bs), topic_name, 0, 123, 456,
                                             include_headers=False, fail_on_data_loss=True)
            for r in rb.to_pylist()]
    assert part == list(range(123, 456))


def test_range_beyond_the_log_is_data_loss(broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A task promised offsets the log no longer has (truncated below the plan) fails with
    failOnDataLoss and returns what exists without it."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(10):
        p.produce(topic_name, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    cfg = ClientConfig(bs, truncation_grace_ms=300)
    with pytest.raises(DataLossError, match=rf"\[10, 20\) of {topic_name}-0"):
        list(read_range(cfg, topic_name, 0, 0, 20, include_headers=False, fail_on_data_loss=True))
    got = [r["offset"] for rb in read_range(cfg, topic_name, 0, 0, 20, include_headers=False,
                                            fail_on_data_loss=False) for r in rb.to_pylist()]
    assert got == list(range(10))


def test_a_lagging_high_watermark_is_waited_for_not_data_loss(broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    """A new leader's HW can briefly sit below what the driver planned; the task waits (within
    the grace period) instead of reporting data loss, and never returns records above the HW."""
    import threading

    from spark_helpers import HighWatermarkCapProxy

    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(100):
        p.produce(topic_name, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    proxy = HighWatermarkCapProxy(bs, cap=60)
    try:
        threading.Timer(1.0, lambda: setattr(proxy, "cap", 1 << 62)).start()
        cfg = ClientConfig(proxy.bootstrap, truncation_grace_ms=20_000)
        got = [r["offset"] for rb in read_range(cfg, topic_name, 0, 0, 100, include_headers=False,
                                                fail_on_data_loss=True) for r in rb.to_pylist()]
    finally:
        proxy.close()
    assert got == list(range(100))


def test_fetch_max_bytes_sets_the_requests_and_arrow_slices_the_answers(broker, topic_name) -> None:  # type: ignore[no-untyped-def]
    """``kafka.fetch.max.bytes`` sets how many Fetch requests a range takes (the batch default,
    FETCH_MAX_BYTES = 16 MiB, reads 6 MB in one; the streaming default, STREAM_FETCH_MAX_BYTES =
    2 MiB, in three or more; 1 MiB in six or more), no Fetch asks for much more than the range
    has left, and each answer reaches Spark in Arrow slices of about ARROW_BATCH_BYTES; the rows
    are the same either way."""
    import dataclasses

    from floodmark.spark.fetch_sizes import REST_MARGIN_BYTES
    from floodmark.spark.fetcher import (
        ARROW_BATCH_BYTES,
        FETCH_MAX_BYTES,
        STREAM_FETCH_MAX_BYTES,
        client_for,
    )
    from floodmark.spark.options import parse_source_options

    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 20,
                  "batch.size": 1_000_000})
    n = 6_000
    for i in range(n):
        p.produce(topic_name, value=b"%06d" % i + b"v" * 994, partition=0)
    assert p.flush(30) == 0

    options = {"kafka.bootstrap.servers": bs, "subscribe": topic_name}
    default = parse_source_options(options, streaming=False).client
    assert default.fetch_max_bytes == FETCH_MAX_BYTES == 16 << 20
    stream = parse_source_options(options, streaming=True).client
    assert stream.fetch_max_bytes == STREAM_FETCH_MAX_BYTES == 2 << 20
    chosen = parse_source_options({**options, "kafka.fetch.max.bytes": "5000000"},
                                  streaming=True).client
    assert chosen.fetch_max_bytes == 5_000_000

    def read(cfg: ClientConfig, end: int) -> tuple[list[pa.RecordBatch], list[int]]:
        """(the batches yielded, the max_bytes of each Fetch request sent): the client's own
        fetch, watched."""
        client = client_for(cfg)
        real, asked = client.fetch, []

        def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
            asked.append(kwargs["max_bytes"])
            return real(*args, **kwargs)

        client.fetch = watched  # type: ignore[method-assign]
        try:
            got = list(read_range(cfg, topic_name, 0, 0, end, include_headers=False,
                                  fail_on_data_loss=True))
        finally:
            del client.fetch
        return got, asked

    whole, whole_asked = read(default, n)
    in_2mib, stream_asked = read(stream, n)
    in_mib, mib_asked = read(dataclasses.replace(default, fetch_max_bytes=1 << 20), n)
    assert whole_asked == [16 << 20]
    assert len(stream_asked) >= 3 and stream_asked[0] == 2 << 20
    assert len(mib_asked) >= 6 and mib_asked[0] == 1 << 20  # 6 MB, at most 1 MiB per answer
    # one answer of ~6 MB reaches Spark in slices of about 2 MiB (views of one decoded batch)
    assert len(whole) == 3
    assert max(rb.num_rows for rb in whole) * 1000 <= ARROW_BATCH_BYTES
    for got in (whole, in_2mib, in_mib):
        assert [r["offset"] for rb in got for r in rb.to_pylist()] == list(range(n))

    # a range that ends inside the log: its second Fetch asks for about the ~1 MB it has left
    # (and a margin), not 2 MiB of records past its end
    part, part_asked = read(stream, 3_000)
    assert [r["offset"] for rb in part for r in rb.to_pylist()] == list(range(3_000))
    assert part_asked[0] == 2 << 20
    assert sum(part_asked) <= 3_000 * 1_100 + 2 * REST_MARGIN_BYTES
