"""The throttle time patched into the hand-packed Produce and Fetch answers (wire/hot.py) is
what kio reads back, in every version served, and nothing else changes."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from floodmark.client.connection import encode_request
from floodmark.records import simple_batch
from floodmark.wire.codec import peek_client_id
from floodmark.wire.hot import (
    FetchPartitionResult,
    NodeEndpoint,
    ProducePartitionResult,
    encode_fetch_response,
    encode_produce_response,
    response_size,
    with_throttle_time,
)


def _read(api_key: int, version: int, parts: list) -> object:
    frame = b"".join(bytes(p) for p in parts)
    assert response_size(parts) == len(frame)
    cls = load_response_schema(api_key, version)
    _, used = entity_reader(cls.__header_schema__)(frame[4:], 0)
    body, _ = entity_reader(cls)(frame[4:], used)
    return body


@pytest.mark.parametrize("version", range(3, 11))
def test_produce_throttle_time(version: int) -> None:
    parts: list = [encode_produce_response(version, 7, [
        ("t", [ProducePartitionResult(0, 0, 42, -1, 0, record_errors=[(1, "bad")])])])]
    before = _read(0, version, parts)
    with_throttle_time(0, version, parts, 1234)
    after = _read(0, version, parts)
    assert after.throttle_time == datetime.timedelta(milliseconds=1234)
    assert after.responses == before.responses


@pytest.mark.parametrize("version", range(4, 19))
def test_fetch_throttle_time(version: int) -> None:
    key: str | uuid.UUID = uuid.uuid4() if version >= 13 else "t"
    parts: list = encode_fetch_response(version, 9, [
        (key, [FetchPartitionResult(0, 6, 5, 5, 0, simple_batch([b"x" * 100]),
                                    current_leader=(1, 3))])],
        node_endpoints=[NodeEndpoint(1, "h", 9092)])
    before = _read(1, version, parts)
    with_throttle_time(1, version, parts, 99)
    after = _read(1, version, parts)
    assert after.throttle_time == datetime.timedelta(milliseconds=99)
    assert after.responses == before.responses


def test_peek_client_id() -> None:
    frame = encode_request(18, 3, 1, {"client_software_name": "x",
                                      "client_software_version": "1"}, client_id="app-1")[4:]
    assert peek_client_id(frame) == "app-1"
    assert peek_client_id(frame[:11]) == ""
