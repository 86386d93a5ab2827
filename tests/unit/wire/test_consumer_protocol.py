"""The consumer protocol's embedded formats (ConsumerProtocolSubscription/Assignment v0-3), as
Kafka's ``ConsumerProtocol`` reads and writes them: what floodmark's own client writes (v0) is
read, an assignment is written in the member's version and read back, a version above the
highest known is read as the highest, and bad bytes are one clear error."""

from __future__ import annotations

import struct

import pytest

from floodmark.client.group import decode_assignment as client_decode_assignment
from floodmark.client.group import encode_assignment as client_encode_assignment
from floodmark.client.group import encode_subscription
from floodmark.wire.consumer_protocol import (
    BadEmbeddedProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)


def test_a_v0_subscription_has_topics_and_owns_nothing() -> None:
    s = decode_subscription(encode_subscription(["b", "a"]))
    assert (s.version, s.topics, s.owned, s.rack_id) == (0, ("b", "a"), {}, None)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignments_round_trip_in_every_version(version: int) -> None:
    data = encode_assignment({"t": (3, 1), "u": (0,)}, version)
    assert version_of(data) == version
    assert decode_assignment(data) == {"t": (1, 3), "u": (0,)}
    assert client_decode_assignment(data) == {"t": [1, 3], "u": [0]}  # the v0 body is shared


def test_other_writers_assignments_and_an_empty_one() -> None:
    assert decode_assignment(client_encode_assignment({"t": [2]})) == {"t": (2,)}
    assert decode_assignment(b"") == {}


def test_a_newer_version_is_read_as_the_highest_known() -> None:
    v3 = encode_assignment({"t": (0,)}, 3)
    assert decode_assignment(struct.pack(">h", 9) + v3[2:]) == {"t": (0,)}
    assert version_of(encode_assignment({"t": (0,)}, 9)) == 3


@pytest.mark.parametrize("data", [b"\x00", b"\xff\xff\x00\x00", b"\x00\x00\x00\x00\x00\x05a"])
def test_bad_bytes_are_one_clear_error(data: bytes) -> None:
    with pytest.raises(BadEmbeddedProtocol):
        decode_subscription(data)
