"""The bounds check in front of kio's native decoder (``wire/bounds.py``).

For every request the broker advertises: any well-formed request kio can encode passes the check
and decodes to what was encoded; any truncation or byte mutation of it either decodes or is
refused with ``ProtocolError`` (never a crash, never an allocation the bytes cannot back). The
two frames from issue 8 that aborted the broker are refused."""

from __future__ import annotations

import contextlib
import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.static.primitive import Records

from floodmark.wire.api_table import SUPPORTED
from floodmark.wire.bounds import check_request
from floodmark.wire.codec import ProtocolError, decode_request

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

ADVERTISED = [(int(key), v) for key, r in SUPPORTED.items()
              for v in range(r.min_version, r.max_version + 1)]

ABORTING_FRAMES = [
    "0000001b000a00061f55d2b300047266757a007fffffffcd1ab591b64cfee1",  # FindCoordinator v6
    "00000025002000043459cf0000047266757a00ddb4bca70d53de4c7d61a801e0cf143affca216ea66d",
]


def encode(key: int, version: int, body: object, correlation_id: int = 7) -> bytes:
    cls = load_request_schema(key, version)
    out = io.BytesIO()
    header = cls.__header_schema__(request_api_key=key, request_api_version=version,
                                   correlation_id=correlation_id, client_id="fuzz")
    entity_writer(cls.__header_schema__)(out, header)
    entity_writer(cls)(out, body)
    return out.getvalue()


@pytest.mark.parametrize("frame_hex", ABORTING_FRAMES)
def test_frames_that_aborted_the_broker_are_refused(frame_hex: str) -> None:
    frame = bytes.fromhex(frame_hex)[4:]
    key, version = struct.unpack_from(">hh", frame)
    with pytest.raises(ProtocolError, match="elements"):
        check_request(frame, key, version)
    with pytest.raises(ProtocolError):
        decode_request(frame)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, int, object]:
    key, version = draw(st.sampled_from(ADVERTISED))
    body = draw(st.from_type(load_request_schema(key, version)))
    return key, version, body


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests())
def test_every_advertised_request_passes_and_round_trips(request: tuple[int, int, object]) -> None:
    key, version, body = request
    frame = encode(key, version, body)
    check_request(frame, key, version)
    _header, decoded = decode_request(frame)
    assert decoded == body


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests(), st.data())
def test_truncated_or_mutated_requests_decode_or_are_refused(
        request: tuple[int, int, object], data: st.DataObject) -> None:
    key, version, body = request
    frame = bytearray(encode(key, version, body))
    if data.draw(st.booleans()):
        frame = frame[:data.draw(st.integers(8, len(frame)))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(8, max(8, len(frame) - 1)))
            if at < len(frame):
                frame[at] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_request(bytes(frame))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests())
def test_huge_counts_in_every_position_are_refused(request: tuple[int, int, object]) -> None:
    """Overwrite each 4-byte window after the header with 0x7fffffff (and each byte with a
    varint that claims ~2^28): the check never lets a count through that the frame cannot back,
    so kio never reserves memory for it."""
    key, version, body = request
    frame = encode(key, version, body)
    for at in range(8, max(9, len(frame) - 3)):
        for patch in (b"\x7f\xff\xff\xff", b"\xff\xff\xff\x7f"):
            mutated = frame[:at] + patch + frame[at + len(patch):]
            with contextlib.suppress(ProtocolError):
                decode_request(mutated)
