"""Small wire helpers of the replication path."""

from __future__ import annotations

import uuid

import pytest


@pytest.mark.parametrize("version", [4, 11, 12, 13, 14, 15])
@pytest.mark.parametrize("replica_id", [-1, 0, 3])
def test_replica_of_reads_the_replica_from_the_decoded_request(version: int,
                                                                replica_id: int) -> None:
    from floodmark.broker.replica_fetcher import replica_of
    from floodmark.client.connection import encode_request
    from floodmark.wire.codec import decode_request

    who = ({"replica_state": {"replica_id": replica_id, "replica_epoch": 9}} if version >= 15
           else {"replica_id": replica_id})
    frame = encode_request(1, version, 7, {
        **who, "max_wait": 100, "min_bytes": 1, "max_bytes": 1000,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [],
        "topics": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [
            {"partition": 0, "fetch_offset": 5, "partition_max_bytes": 100}]}]},
        client_id="some-client-id")[4:]
    header, body = decode_request(frame)
    assert header.api_version == version
    assert replica_of(body, version) == (replica_id, 9 if version >= 15 else -1)
