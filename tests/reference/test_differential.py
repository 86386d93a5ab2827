"""The differential tester in the default suite: every scenario of
``tests/reference/differential`` against the session's Kafka node and this module's floodmark
broker; a difference not in the known list (``differential/known.py``) fails its scenario's test,
and so does a known difference that no longer occurs (the list must shrink when floodmark is
fixed). ``python -m tests.reference.differential`` prints the full report."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.reference.differential.compare import Difference
from tests.reference.differential.known import KNOWN
from tests.reference.differential.report import render
from tests.reference.differential.runner import Outcome, compare_sides, run_side
from tests.reference.differential.scenarios import SCENARIOS, Scenario
from tests.reference.kafka_node import KafkaCluster

pytestmark = pytest.mark.integration

RUN_ID = uuid.uuid4().hex[:8]
_outcomes: dict[str, Outcome] = {}


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_scenario_answers_as_kafka(sc: Scenario, kafka_broker: KafkaCluster,
                                   broker: Any) -> None:
    o = _outcomes[sc.name] = compare_sides(
        sc, run_side(sc, kafka_broker.bootstrap, RUN_ID), run_side(sc, broker.bootstrap, RUN_ID))
    assert o.kafka.failure is None, f"the scenario broke on Kafka: {o.kafka.failure}"
    new = o.unexplained()
    assert not new, "differences from Kafka not in the known list:\n" + render([o])


@pytest.mark.xdist_group("kafka_reference")  # the scenarios' worker (they use kafka_broker),
def test_every_known_difference_still_occurs() -> None:  # after them: it reads their outcomes
    if len(_outcomes) < len(SCENARIOS):
        pytest.skip("needs every scenario's outcome (run the whole module)")
    seen: list[Difference] = [d for o in _outcomes.values() for d in o.differences]
    stale = [k.pattern for k in KNOWN if not any(k.matches(d) for d in seen)]
    assert not stale, f"known differences that no longer occur (remove them): {stale}"
