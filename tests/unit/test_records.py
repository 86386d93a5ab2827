"""Record batch v2: header view, CRC-32C, in-place patches, builder/decoder, codecs."""

from __future__ import annotations

import struct

import crc32c
import pytest

from floodmark.compression import XERIAL_MAGIC, Compression, compress, decompress
from floodmark.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    CorruptRecordError,
    Record,
    build_batch,
    decode_batch,
    decode_records,
    iter_batches,
    read_varint,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    simple_batch,
    write_varint,
)


def hand_built_batch() -> bytes:
    """One record (key None, value b"hi", no headers) encoded field by field, by hand."""
    record_body = bytes([0])  # attributes
    record_body += bytes([0])  # timestampDelta 0 (zigzag)
    record_body += bytes([0])  # offsetDelta 0
    record_body += bytes([1])  # key length -1 -> zigzag 1
    record_body += bytes([4]) + b"hi"  # value length 2 -> zigzag 4
    record_body += bytes([0])  # header count 0
    record = bytes([len(record_body) * 2]) + record_body
    after_crc = struct.pack(">hiqqqhii", 0, 0, 1234, 1234, 77, 3, 5, 1) + record
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch + magic + crc + rest
    return struct.pack(">qiibI", 42, length, 9, 2, crc) + after_crc


def test_hand_built_batch_header_fields_and_crc() -> None:
    data = hand_built_batch()
    header = BatchHeader(data)
    assert header.base_offset == 42
    assert header.partition_leader_epoch == 9
    assert header.magic == 2
    assert header.size == len(data)
    assert header.base_timestamp == 1234 and header.max_timestamp == 1234
    assert header.producer_id == 77 and header.producer_epoch == 3 and header.base_sequence == 5
    assert header.records_count == 1
    assert header.last_offset == 42 and header.next_offset == 43
    assert header.compression is Compression.NONE
    assert not header.is_transactional and not header.is_control
    assert header.verify_crc()
    _, records = decode_batch(data)
    assert records == [Record(42, 1234, None, b"hi", ())]


def test_builder_matches_hand_built_bytes() -> None:
    built = build_batch(
        [Record(0, 1234, None, b"hi")],
        base_offset=42,
        partition_leader_epoch=9,
        producer_id=77,
        producer_epoch=3,
        base_sequence=5,
    )
    assert built == hand_built_batch()


@pytest.mark.parametrize("position", [21, 30, HEADER_SIZE, -1])
def test_corrupted_byte_fails_crc(position: int) -> None:
    data = bytearray(hand_built_batch())
    data[position] ^= 0x01
    header = BatchHeader(data)
    assert not header.verify_crc()
    with pytest.raises(CorruptRecordError, match="CRC"):
        header.validate()


def test_patching_offset_and_epoch_keeps_crc_valid() -> None:
    data = bytearray(simple_batch([b"a", b"b"]))
    set_base_offset(data, 0, 1000)
    set_partition_leader_epoch(data, 0, 17)
    header = BatchHeader(data)
    assert header.base_offset == 1000 and header.partition_leader_epoch == 17
    assert header.verify_crc()
    assert [r.offset for r in decode_batch(data)[1]] == [1000, 1001]


def test_log_append_time_patch_recomputes_crc() -> None:
    data = bytearray(simple_batch([b"a", b"b"], timestamp_ms=5))
    set_log_append_time(data, 0, 999)
    header = BatchHeader(data)
    assert header.timestamp_type == LOG_APPEND_TIME and header.max_timestamp == 999
    assert header.verify_crc()
    assert [r.timestamp_ms for r in decode_batch(data)[1]] == [999, 999]


def test_iter_batches_and_validation_errors() -> None:
    one = simple_batch([b"x"])
    two = simple_batch([b"y", b"z"], base_offset=1)
    both = one + two
    positions = [(p, h.base_offset) for p, h in iter_batches(both)]
    assert positions == [(0, 0), (len(one), 1)]
    with pytest.raises(CorruptRecordError, match="truncated"):
        list(iter_batches(both[:-3]))
    with pytest.raises(CorruptRecordError, match=r"truncated|short"):
        list(iter_batches(both + b"\x00" * 5))
    bad_magic = bytearray(one)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        list(iter_batches(bytes(bad_magic)))
    bad_length = bytearray(one)
    struct.pack_into(">i", bad_length, 8, 10)
    with pytest.raises(CorruptRecordError, match="batchLength 10"):
        list(iter_batches(bytes(bad_length)))
    with pytest.raises(CorruptRecordError, match="short"):
        BatchHeader(one[:30])


@pytest.mark.parametrize(
    "value", [0, 1, -1, 63, -64, 64, 300, -301, 2**31 - 1, -(2**31), 2**62, -(2**63)]
)
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    assert read_varint(out, 0) == (value, len(out))


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_round_trip(codec: Compression) -> None:
    records = [
        Record(i, 1_000 + i, f"k{i}".encode(), (b"value-%d " % i) * 50, (("h", b"v"), ("n", None)))
        for i in range(20)
    ]
    batch = build_batch(records, base_offset=7, compression=codec, base_timestamp=1_000)
    header, decoded = decode_batch(batch)
    assert header.compression is codec
    assert decoded == [
        Record(7 + i, r.timestamp_ms, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]
    if codec is not Compression.NONE:
        assert header.size < sum(len(r.value or b"") for r in records)


def test_snappy_raw_and_xerial_both_decode() -> None:
    payload = b"abc" * 50_000  # > one 32 KiB xerial block
    xerial = compress(Compression.SNAPPY, payload)
    assert xerial.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, xerial) == payload
    import cramjam

    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert decompress(Compression.SNAPPY, raw) == payload


def test_decode_records_over_many_batches() -> None:
    data = simple_batch([b"a"], base_offset=0) + simple_batch([b"b", b"c"], base_offset=1)
    assert [r.value for r in decode_records(data)] == [b"a", b"b", b"c"]
    assert [r.offset for r in decode_records(data)] == [0, 1, 2]


def test_corrupt_compressed_payload_is_reported() -> None:
    batch = bytearray(build_batch([Record(0, 0, None, b"x" * 100)], compression=Compression.GZIP))
    batch[HEADER_SIZE + 12] ^= 0xFF
    # Fix the CRC so only the payload is bad.
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(batch))
