"""Interop with real client code: batches built by kafka-python's record builder (the code its
producer uses, with its own snappy/lz4/zstd/gzip codecs) decode here, and ours decode there."""

from __future__ import annotations

import pytest

from floodmark.compression import Compression
from floodmark.records import BatchHeader, Record, build_batch, decode_batch

kafka_records = pytest.importorskip("kafka.record.default_records")

CODECS = list(Compression)


def kafka_python_batch(codec: Compression, count: int) -> bytes:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=10 * 1024 * 1024,
    )
    for i in range(count):
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=b"k%d" % i,
            value=(b"v%d-" % i) * 40,
            headers=[("h", b"x"), ("empty", None)],
        )
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_kafka_python_batches_decode_here(codec: Compression) -> None:
    data = kafka_python_batch(codec, 50)
    header = BatchHeader(data)
    assert header.compression is codec
    assert header.verify_crc()
    _, records = decode_batch(data)
    assert len(records) == 50
    assert records[7] == Record(
        7, 1_700_000_000_007, b"k7", b"v7-" * 40, (("h", b"x"), ("empty", None))
    )


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_our_batches_decode_in_kafka_python(codec: Compression) -> None:
    records = [
        Record(i, 1_000 + i, None if i % 3 == 0 else b"key", b"payload-%d" % i * 30, (("a", b"1"),))
        for i in range(40)
    ]
    data = build_batch(records, base_offset=100, partition_leader_epoch=4, compression=codec)
    batch = kafka_records.DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.compression_type == int(codec)
    decoded = list(batch)
    assert [r.offset for r in decoded] == list(range(100, 140))
    assert [r.value for r in decoded] == [r.value for r in records]
    assert [r.key for r in decoded] == [r.key for r in records]
    assert [r.timestamp for r in decoded] == [r.timestamp_ms for r in records]
    assert [list(r.headers) for r in decoded] == [[("a", b"1")]] * 40
