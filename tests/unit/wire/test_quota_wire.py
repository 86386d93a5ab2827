"""The throttle time patched into the hand-packed Produce and Fetch answers (wire/hot.py) is
what kio reads back, in every version served, and nothing else changes."""

from __future__ import annotations

import dataclasses
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


# -- request_percentage: the throttle time raised in any served answer ---------------------------
def _served() -> list[tuple[int, int]]:
    from floodmark.wire.api_table import SUPPORTED
    return [(int(k), v) for k, r in SUPPORTED.items() if int(k) not in (0, 1)
            for v in range(r.min_version, r.max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), _served())
def test_request_quota_throttle_time_in_every_served_answer(api_key: int, version: int) -> None:
    """Every answer whose throttle_time_ms sits first in its body reads back the raised value
    (and nothing else changes); an answer without one there is left as it was."""
    from floodmark.broker.quotas import raise_throttle_time, throttle_time_offset
    from floodmark.wire.codec import encode_response

    parts: list = encode_response(api_key, version, 11, {})
    before = _read(api_key, version, parts)
    raise_throttle_time(api_key, version, parts, 1234)
    after = _read(api_key, version, parts)
    names = [f.name for f in dataclasses.fields(before) if f.name != "throttle_time"]
    if throttle_time_offset(api_key, version) is None:
        assert after == before
        return
    assert after.throttle_time == datetime.timedelta(milliseconds=1234)
    assert all(getattr(after, n) == getattr(before, n) for n in names)
    raise_throttle_time(api_key, version, parts, 10)  # a shorter one never lowers it
    assert _read(api_key, version, parts).throttle_time == datetime.timedelta(milliseconds=1234)


@pytest.mark.parametrize("version", [4, 12, 16])
def test_request_quota_raises_a_fetch_answers_throttle_time(version: int) -> None:
    from floodmark.broker.quotas import raise_throttle_time

    parts: list = encode_fetch_response(version, 5, [])
    raise_throttle_time(1, version, parts, 700)
    assert _read(1, version, parts).throttle_time == datetime.timedelta(milliseconds=700)
