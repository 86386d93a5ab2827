"""Every scenario against both brokers, answers normalised and compared."""

from __future__ import annotations

import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.reference.differential.compare import Difference, differences
from tests.reference.differential.known import Known, explain
from tests.reference.differential.normalise import Normaliser
from tests.reference.differential.scenarios import SCENARIOS, Scenario
from tests.reference.differential.session import Session


@dataclass
class Side:
    steps: dict[str, Any]
    messages: dict[str, str | None]
    failure: str | None = None  # the scenario itself broke (not an answer)


@dataclass
class Outcome:
    scenario: Scenario
    kafka: Side
    floodmark: Side
    differences: list[Difference] = field(default_factory=list)

    def explained(self) -> list[tuple[Difference, Known | None]]:
        return [(d, explain(d)) for d in self.differences]

    def unexplained(self) -> list[Difference]:
        return [d for d in self.differences if explain(d) is None]


def run_side(sc: Scenario, bootstrap: str, run_id: str) -> Side:
    session = Session(bootstrap, run_id)
    failure = None
    try:
        sc.run(session)
    except Exception as exc:  # the scenario's own breakage is reported, not raised
        failure = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
    finally:
        session.close()
    norm = Normaliser(run_id)
    steps = {k: norm(v, k) for k, v in session.steps.items()}
    return Side(steps, norm.messages, failure)


def run_all(kafka: str, floodmark: str, only: list[str] | None = None) -> list[Outcome]:
    run_id = uuid.uuid4().hex[:8]
    outcomes = []
    for sc in SCENARIOS:
        if only and sc.name not in only:
            continue
        outcomes.append(compare_sides(sc, run_side(sc, kafka, run_id),
                                      run_side(sc, floodmark, run_id)))
    return outcomes


def compare_sides(sc: Scenario, k: Side, f: Side) -> Outcome:
    o = Outcome(sc, k, f, differences(sc.name, k.steps, f.steps))
    if k.failure or f.failure:
        o.differences.append(Difference(sc.name, "<scenario failed>", k.failure is not None,
                                        f.failure is not None))
    return o
