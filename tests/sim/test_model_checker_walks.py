"""Random-walk mode of the model checker: seeded, reproducible, never a proof."""

from __future__ import annotations

import json
import math

import pytest

from floodmark.cli import main
from floodmark.mc.checker import replay
from floodmark.mc.model import ModelConfig
from floodmark.mc.walk import random_walks
from floodmark.replication.modes import Truncation

BIG = {"replicas": 3, "log_size": 3, "max_epoch": 4}


@pytest.mark.parametrize("mode", [Truncation.HIGH_WATERMARK, Truncation.EPOCH_OFFSET])
def test_walks_find_historical_violations_beyond_exhaustive_bounds(mode: Truncation) -> None:
    config = ModelConfig(mode, **BIG)  # type: ignore[arg-type]
    result = random_walks(config, walks=3000, depth=60, seed=1, time_limit_s=math.inf)
    assert result.violation is not None
    assert not result.complete and not result.holds
    assert result.search == "random-walk" and result.seed == 1
    actions = [step.action for step in result.trace[1:] if step.action is not None]
    assert replay(config, actions) == [step.state for step in result.trace]


def test_walks_are_reproducible() -> None:
    # epoch-offset, seed 1: a violation after 199 walks (high-watermark, seed 7: 767, for
    # three times the CPU, twice)
    config = ModelConfig(Truncation.EPOCH_OFFSET, **BIG)  # type: ignore[arg-type]
    first = random_walks(config, walks=3000, seed=1, time_limit_s=math.inf)
    second = random_walks(config, walks=3000, seed=1, time_limit_s=math.inf)
    assert first.violation is not None
    assert first.trace == second.trace and first.walks == second.walks


def test_walks_find_nothing_in_leader_epoch_mode() -> None:
    config = ModelConfig(Truncation.LEADER_EPOCH, **BIG)  # type: ignore[arg-type]
    result = random_walks(config, walks=300, depth=60, seed=3, time_limit_s=math.inf)
    assert result.violation is None and not result.holds
    assert result.walks == 300 and result.transitions > 300 and result.states > 300


def test_walk_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        random_walks(ModelConfig(Truncation.LEADER_EPOCH), walks=0)


def test_cli_walks_json(capsys: pytest.CaptureFixture[str]) -> None:
    bound = ["--replicas", "3", "--log-size", "3", "--max-epoch", "4"]
    walks = ["--walks", "3000", "--seed", "1", "--json"]
    # epoch-offset: the CLI's JSON, not the search (the high-watermark walk, seed 1, is the
    # test above, at about six times this one's CPU)
    code = main(["sim", "check", "--truncation", "epoch-offset", *bound, *walks])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["search"] == "random-walk" and out["seed"] == 1 and out["walks"] >= 1
    assert out["holds"] is False and out["violation"]["trace"]
    code = main(["sim", "check", "--walks", "50", "--walk-depth", "30"])
    text = capsys.readouterr().out
    assert code == 0 and "NO VIOLATION in 50 random walks (not a proof)" in text


@pytest.mark.slow
def test_many_walks_find_nothing_in_leader_epoch_mode_three_replicas() -> None:
    """A bound the exhaustive search cannot afford (3 replicas, 3 records, 4 epochs, async ISR
    changes): a nightly-style random-walk probe."""
    config = ModelConfig(Truncation.LEADER_EPOCH, **BIG)  # type: ignore[arg-type]
    result = random_walks(config, walks=20_000, depth=80, seed=11, time_limit_s=math.inf)
    assert result.violation is None
    assert result.walks == 20_000
