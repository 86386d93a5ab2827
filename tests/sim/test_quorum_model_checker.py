"""The quorum model checker (``floodmark sim check-quorum``): exhaustive over small bounds, run by
the controller's own ``QuorumCore`` and ``QuorumDriver``, and able to catch unsafe variants of
them (each mutation patches the running code where the core looks it up)."""

from __future__ import annotations

import json

import pytest

from floodmark.cli.main import main
from floodmark.controller.quorum import core as quorum_core
from floodmark.controller.quorum.roles import Leader
from floodmark.mc.quorum.checker import QuorumResult, check
from floodmark.mc.quorum.model import QuorumModel, QuorumModelConfig, StateView
from floodmark.mc.quorum.render import result_text


def _replay(config: QuorumModelConfig, result: QuorumResult) -> list[StateView]:
    """A fresh model takes the counterexample's actions one by one: the states it passes."""
    model = QuorumModel(config)
    state = model.initial_state()
    views = [model.view(state)]
    for action, _state in result.path[1:]:
        assert action is not None
        state = next(s for a, s in model.successors(state) if a == action)
        views.append(model.view(state))
    return views


def test_a_small_bound_holds_exhaustively() -> None:
    model, result = check(QuorumModelConfig(voters=2, max_epoch=1, max_records=0),
                          time_limit_s=120)
    assert result.violation is None
    assert result.complete and result.holds
    assert result.states > 10_000
    # The search really elected leaders and committed their first records.
    views = [model.voter(v) for v in range(len(model._voters.values))]
    assert any(isinstance(v.role, Leader) and v.high_watermark == 1 for v in views)


def test_a_minority_quorum_elects_two_leaders_in_one_epoch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_core, "majority", lambda voters: voters // 2)
    config = QuorumModelConfig(voters=2, max_epoch=1, max_records=0)
    model, result = check(config, time_limit_s=60)
    assert result.violation is not None
    assert result.violation.invariant == "election-safety"
    final = model.view(result.path[-1][1])
    assert sum(1 for v in final.voters if v.is_leader and v.epoch == 1) == 2
    assert _replay(config, result) == [model.view(s) for _a, s in result.path]
    text = result_text(model, result)
    assert "VIOLATED election-safety" in text and "shortest counterexample" in text


def test_cli_exit_codes_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "check-quorum", "--voters", "2", "--max-epoch", "1",
                 "--max-records", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["holds"] and out["complete"] and out["states"] > 10_000
    assert main(["sim", "check-quorum", "--max-states", "50"]) == 3
    assert "INCOMPLETE" in capsys.readouterr().out
    assert main(["sim", "check-quorum", "--voters", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--voters" in err
