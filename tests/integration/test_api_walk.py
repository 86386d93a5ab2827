"""Everything ApiVersions advertises really works at every advertised version: a minimal request
for each (key, version) of ``SUPPORTED`` gets a well-formed answer with its correlation id on a
connection that stays open (issue 9, "a test walks the table")."""

from __future__ import annotations

from typing import Any

import pytest

from floodmark.client import KafkaConnection
from floodmark.errors import ErrorCode
from floodmark.wire.api_table import SUPPORTED, ApiKey

pytestmark = pytest.mark.integration

# Fields whose neutral value (0, empty) would make the request wait or get no answer at all.
OVERRIDES: dict[ApiKey, dict[str, Any]] = {
    ApiKey.PRODUCE: {"acks": 1, "timeout": 1000},  # acks=0 has no response
    ApiKey.FETCH: {"max_wait": 0, "replica_id": -1, "min_bytes": 1, "max_bytes": 1 << 20,
                   "session_epoch": -1},
    ApiKey.LIST_OFFSETS: {"replica_id": -1},
    ApiKey.JOIN_GROUP: {"group_id": "walk", "session_timeout": 6000,
                        "rebalance_timeout": 6000, "protocol_type": "consumer"},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {"replica_id": -1},
    ApiKey.ELECT_LEADERS: {"topic_partitions": []},
    ApiKey.DESCRIBE_CLUSTER: {"endpoint_type": 1},
    ApiKey.METADATA: {"topics": []},
    ApiKey.DESCRIBE_LOG_DIRS: {"topics": []},
}


# Refused on this PLAINTEXT listener with Kafka's -1 times (DelegationTokenManager.ErrorTimestamp),
# which kio's reader refuses to decode ("negative timestamp"): read at the frame.
NEGATIVE_TIMES = frozenset({ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
                            ApiKey.EXPIRE_DELEGATION_TOKEN})


def _raw_error(conn: KafkaConnection, key: ApiKey, version: int) -> int:
    """The error code of an answer whose body starts with it, after the correlation id (and,
    flexible versions, the header's tag buffer)."""
    corr = conn.send(int(key), version, {})
    frame = bytes(conn._read_exact(int.from_bytes(bytes(conn._read_exact(4)), "big")))
    assert int.from_bytes(frame[:4], "big") == corr
    flexible = version >= 2
    start = 5 if flexible else 4
    return int.from_bytes(frame[start:start + 2], "big", signed=True)


def test_every_advertised_version_answers(broker) -> None:  # type: ignore[no-untyped-def]
    walked = 0
    with KafkaConnection(broker.bootstrap, timeout_s=30) as conn:
        versions = conn.request(18, 3, {"client_software_name": "walk",
                                        "client_software_version": "1"})
        advertised = {int(k.api_key): (int(k.min_version), int(k.max_version))
                      for k in versions.api_keys}
        assert advertised == {int(k): (r.min_version, r.max_version)
                              for k, r in SUPPORTED.items()}
        for key, rng in sorted(SUPPORTED.items()):
            for version in range(rng.min_version, rng.max_version + 1):
                body = OVERRIDES.get(key, {})
                if key in NEGATIVE_TIMES:
                    assert _raw_error(conn, key, version) == \
                        ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, f"{key.name} v{version}"
                    walked += 1
                    continue
                try:
                    answer = conn.request(int(key), version, body)
                except Exception as exc:  # name the API in the failure
                    raise AssertionError(f"{key.name} v{version}: {exc!r}") from exc
                assert answer is not None, f"{key.name} v{version}"
                walked += 1
    assert walked > 150
