"""Property tests: record batch build/decode round trip across codecs; varints; patches."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.records import (
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    build_batch,
    decode_batch,
    decode_records,
    read_varint,
    set_base_offset,
    set_partition_leader_epoch,
    varint_size,
    write_varint,
)

maybe_bytes = st.one_of(st.none(), st.binary(max_size=200))
headers = st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=3).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn) -> list[Record]:
    count = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
    base_ts = draw(st.integers(0, 2**41))
    records = []
    offset = 0
    for i in range(count):
        records.append(
            Record(
                offset,
                base_ts + draw(st.integers(-1000, 1000)),
                draw(maybe_bytes),
                draw(maybe_bytes),
                draw(headers),
            )
        )
        offset += gaps[i]
    return records


@settings(max_examples=60, deadline=None)
@given(
    records=record_lists(),
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(0, 2**40),
    epoch=st.integers(-1, 2**20),
    producer_id=st.integers(-1, 2**40),
    transactional=st.booleans(),
)
def test_build_decode_round_trip(
    records: list[Record],
    codec: Compression,
    base_offset: int,
    epoch: int,
    producer_id: int,
    transactional: bool,
) -> None:
    data = build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    header, decoded = decode_batch(data)
    assert header.verify_crc()
    assert header.records_count == len(records)
    assert header.compression is codec
    assert header.is_transactional is transactional
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.last_offset == base_offset + records[-1].offset
    assert header.max_timestamp == max(r.timestamp_ms for r in records)
    expected = [
        Record(base_offset + r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in records
    ]
    assert decoded == expected
    # Stamping a new offset and epoch keeps the CRC valid and shifts decoded offsets.
    patched = bytearray(data)
    set_base_offset(patched, 0, base_offset + 7)
    set_partition_leader_epoch(patched, 0, epoch + 1)
    assert BatchHeader(patched).verify_crc()
    assert [r.offset for r in decode_records(bytes(patched))] == [r.offset + 7 for r in expected]


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray(b"\x01")
    write_varint(out, value)
    assert len(out) == 1 + varint_size(value)
    assert read_varint(out, 1) == (value, len(out))


@settings(max_examples=60, deadline=None)
@given(records=record_lists(), position=st.integers(0, 10_000), flip=st.integers(1, 255))
def test_any_flipped_byte_in_crc_range_is_detected(
    records: list[Record], position: int, flip: int
) -> None:
    data = bytearray(build_batch(records))
    index = 21 + position % (len(data) - 21)
    data[index] ^= flip
    assert not BatchHeader(data).verify_crc()
