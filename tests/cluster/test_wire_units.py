"""Small wire helpers of the replication path."""

from __future__ import annotations

import uuid

import pytest


@pytest.mark.parametrize("version", [4, 11, 12, 13, 14])
@pytest.mark.parametrize("replica_id", [-1, 0, 3])
def test_peek_fetch_replica_id_matches_the_decoded_request(version: int, replica_id: int) -> None:
    from floodmark.broker.replica_fetcher import peek_fetch_replica_id
    from floodmark.client.connection import encode_request
    from floodmark.wire.codec import decode_request

    frame = encode_request(1, version, 7, {
        "replica_id": replica_id, "max_wait": 100, "min_bytes": 1, "max_bytes": 1000,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [],
        "topics": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "fetch_offset": 5,
                                                  "partition_max_bytes": 100}]}]},
        client_id="some-client-id")[4:]
    assert peek_fetch_replica_id(frame, version) == replica_id
    assert int(decode_request(frame)[1].replica_id) == replica_id
