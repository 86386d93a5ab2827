"""floodmark advertises one Kafka release's API versions: for every API key floodmark serves, its
ApiVersions max is the max the real Kafka (the release ``tools/kafka/pom.xml`` pins, the session's
``kafka_broker``) advertises, except the reasoned list ``api_table.BELOW_KAFKA``. Minimums are
floodmark's own (never raised, docs/wire.md), so only maxima are compared. A mix no release has
made clients that infer the broker's version from ApiVersions guess wrong (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest

from floodmark.client.connection import KafkaConnection
from floodmark.wire.api_table import BELOW_KAFKA, KAFKA_REFERENCE, SUPPORTED, ApiKey
from tests.reference.kafka_node import KafkaCluster, kafka_version

pytestmark = pytest.mark.integration
UPDATE_RAFT_VOTER = 82  # not an ApiKey: no floodmark listener speaking Kafka's protocol serves it


def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with KafkaConnection(bootstrap, client_id="api-versions-check") as conn:
        answer = conn.request(int(ApiKey.API_VERSIONS), 3, {
            "client_software_name": "floodmark-tests", "client_software_version": "0"})
    assert int(answer.error_code) == 0
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}


def test_the_reference_release_is_the_one_the_repo_runs() -> None:
    assert kafka_version() == KAFKA_REFERENCE, "api_table.KAFKA_REFERENCE names the pinned Kafka"


def test_every_served_api_goes_up_to_kafkas_max(kafka_broker: KafkaCluster) -> None:
    kafka = _advertised(kafka_broker.bootstrap)
    mismatched = {
        key.name: {"kafka": kafka.get(int(key), (None, None))[1], "floodmark": rng.max_version}
        for key, rng in SUPPORTED.items()
        if key not in BELOW_KAFKA and kafka.get(int(key), (None, None))[1] != rng.max_version}
    assert not mismatched, f"max versions that differ from Kafka {KAFKA_REFERENCE}: {mismatched}"


def test_the_exceptions_are_still_exceptions(kafka_broker: KafkaCluster) -> None:
    """Each listed key really is below Kafka's max (else it leaves the list), at the max the
    list records for Kafka."""
    kafka = _advertised(kafka_broker.bootstrap)
    for key, kafka_max in BELOW_KAFKA.items():
        assert kafka[int(key)][1] == kafka_max, (key.name, kafka[int(key)])
        assert SUPPORTED[key].max_version < kafka_max, f"{key.name} is served: drop it"


def test_floodmark_answers_what_the_table_says(broker: Any) -> None:
    served = _advertised(broker.bootstrap)
    assert served == {int(k): (r.min_version, r.max_version) for k, r in SUPPORTED.items()}


def test_update_raft_voter_is_controller_only_as_in_kafka(kafka_broker: KafkaCluster,
                                                          broker: Any) -> None:
    """UpdateRaftVoter (82, KIP-853) is on Kafka's controller listener only, v0: a voter sends
    it to the quorum leader. Floodmark's brokers do not advertise it either; its controllers
    serve it on their own channel (``controller/quorum/update_voter.py``, docs/quorum.md)."""
    controller = _advertised(f"127.0.0.1:{kafka_broker.nodes[0].controller_port}")
    assert controller.get(UPDATE_RAFT_VOTER) == (0, 0)
    assert UPDATE_RAFT_VOTER not in _advertised(kafka_broker.bootstrap)
    assert UPDATE_RAFT_VOTER not in _advertised(broker.bootstrap)
