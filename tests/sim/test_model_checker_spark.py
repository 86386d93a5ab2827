"""The exhaustive search split into parts on a real local SparkSession (``sim check --spark``)."""

from __future__ import annotations

import json

import pytest

from floodmark.cli import main
from floodmark.mc.checker import check, replay
from floodmark.mc.distributed import check_on_spark, split
from floodmark.mc.model import ModelConfig
from floodmark.replication.modes import Truncation

# The Spark runs start the process's SparkSession (its JVM): on the worker that holds the
# session of tests/spark (tests/conftest.py, SHARED_SESSION_GROUPS), so a run starts one JVM.
pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_split_covers_the_first_levels() -> None:
    config = ModelConfig(Truncation.LEADER_EPOCH)
    first = split(config, 6)
    assert first is not None
    prefixes, depth = first
    assert len(prefixes) >= 6 and depth >= 1
    assert all(replay(config, list(p)) is not None for p in prefixes)
    # A violation within the first levels: no split, the plain search answers.
    assert split(ModelConfig(Truncation.HIGH_WATERMARK), 10**6) is None


def test_spark_parts_prove_what_the_local_search_proves_and_find_the_same_violation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = ModelConfig(Truncation.LEADER_EPOCH)
    distributed = check_on_spark(config, "local[2]", parts=4)
    assert distributed.holds and distributed.violation is None
    assert distributed.search.startswith("bfs on spark")
    assert distributed.states >= check(config).states  # parts overlap; none is skipped

    code = main(["sim", "check", "--truncation", "high-watermark", "--spark", "local[2]",
                 "--spark-parts", "4", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["holds"] is False
    assert out["violation"]["invariant"] == "StrongIsr"
    trace = out["violation"]["trace"]
    local = check(ModelConfig(Truncation.HIGH_WATERMARK))
    assert local.violation is not None and len(trace) - 1 >= len(local.trace) - 1
