"""ListConfigResources (v0: KIP-714's ListClientMetricsResources; v1: KIP-1142) on a real
broker (its answers are compared with Kafka's by the differential scenario
``list_config_resources``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.errors import ErrorCode

pytestmark = pytest.mark.integration

API, CREATE_TOPICS = 74, 19
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


@pytest.fixture
def conn(broker: Any) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as c:
        yield c


def _listed(c: KafkaConnection, types: list[int]) -> tuple[int, list[tuple[str, int]]]:
    r = c.request(API, 1, {"resource_types": types})
    return int(r.error_code), [(r.resource_name, int(r.resource_type))
                               for r in r.config_resources]


def test_brokers_topics_and_what_floodmark_has_none_of(conn: KafkaConnection) -> None:
    name = f"lcr-{uuid.uuid4().hex[:8]}"
    r = conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": 1,
                                                    "replication_factor": 1, "assignments": [],
                                                    "configs": []}],
                                        "timeout": 10_000, "validate_only": False})
    assert int(r.topics[0].error_code) == 0
    assert _listed(conn, [BROKER, BROKER_LOGGER]) == (0, [("1", BROKER_LOGGER), ("1", BROKER)])
    error, topics = _listed(conn, [TOPIC])
    assert error == 0 and (name, TOPIC) in topics
    assert topics == sorted(topics)
    assert _listed(conn, [CLIENT_METRICS]) == (0, [])
    # No type named: every type; an unknown one refuses the whole request.
    error, every = _listed(conn, [])
    assert error == 0 and {t for _, t in every} - {GROUP} == {TOPIC, BROKER, BROKER_LOGGER}
    assert _listed(conn, [TOPIC, 64]) == (ErrorCode.UNSUPPORTED_VERSION, [])
    r = conn.request(API, 0, {})
    assert (int(r.error_code), list(r.config_resources)) == (0, [])


def test_a_group_with_a_config_of_its_own_is_listed(conn: KafkaConnection) -> None:
    """KIP-1142: a group is a config resource once it has a config of its own; deleting its
    last config takes it off the list."""
    group = f"lcr-group-{uuid.uuid4().hex[:8]}"

    def alter(op: int, value: str | None) -> int:
        r = conn.request(44, 1, {"resources": [{
            "resource_type": GROUP, "resource_name": group,
            "configs": [{"name": "consumer.session.timeout.ms", "config_operation": op,
                         "value": value}]}], "validate_only": False})
        return int(r.responses[0].error_code)

    assert (group, GROUP) not in _listed(conn, [GROUP])[1]
    assert alter(0, "50000") == 0  # SET
    error, listed = _listed(conn, [GROUP])
    assert error == 0 and (group, GROUP) in listed and listed == sorted(listed)
    assert (group, GROUP) in _listed(conn, [])[1]
    assert alter(1, None) == 0  # DELETE
    assert (group, GROUP) not in _listed(conn, [GROUP])[1]
