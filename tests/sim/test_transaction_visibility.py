"""The transaction-visibility scenario (issue 15): the step table's LSO column where a
transaction is open, and the simulator's read-committed invariant, which must catch a partition
whose LSO ignores open transactions."""

from __future__ import annotations

import json

import pytest

from floodmark.cli import main
from floodmark.replication.modes import Truncation
from floodmark.replication.partition import Partition
from floodmark.sim.partition.report import render_steps
from floodmark.sim.partition.scenarios import run_scenario


def test_lso_column_only_where_a_transaction_is_open() -> None:
    result = run_scenario("transaction-visibility", Truncation.LEADER_EPOCH)
    assert result.as_expected, result.verdict
    lines = render_steps(result.steps)
    first = next(i for i, s in enumerate(result.steps) if "opens p7" in s["event"])
    # Before the first transaction: no LSO column.
    assert not any("LSO=" in line for line in lines[: first * 3])
    assert any("LSO=" in line for line in lines[first * 3 : (first + 1) * 3])
    row = next(line for line in lines if "LSO=1" in line and "open={p7@1 p8@3}" in line)
    assert "[0:e0:p0 | 1:e0:t1" in row  # the LSO drawn in the log
    # After the commit on B, nothing is open: the column is gone again.
    assert "LSO=" not in render_steps(result.steps[-1:])[1]
    for step in result.steps:
        for snap in step["replicas"].values():
            if snap.get("alive", True) and "lso" in snap:
                assert snap["lso"] <= snap["hw"]


def test_cli_prints_the_legend_and_json_has_the_lso(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "scenario", "transaction-visibility"]) == 0
    out = capsys.readouterr().out
    assert "LSO (last stable offset" in out and "LSO=3" in out
    assert main(["sim", "scenario", "transaction-visibility", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["facts"]["lso_after_failover"] == 3
    assert data["steps"][-1]["replicas"]["B"]["lso"] == 6


def test_the_checker_catches_an_lso_that_ignores_open_transactions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """If the partition answered read_committed up to the HW (LSO := HW), the consumer would
    be served records of open and aborted transactions: the simulator must say so."""
    monkeypatch.setattr(Partition, "last_stable_offset",
                        property(lambda self: self.high_watermark))
    result = run_scenario("transaction-visibility", Truncation.LEADER_EPOCH)
    assert not result.as_expected
    assert "read-committed" in result.facts["violations"]


def _explore_seed(seed: int) -> tuple[list[str], int]:
    """One explorer seed with transactions: (violated invariants, committed records served)."""
    from floodmark.sim.partition import explore

    clusters = []
    build = explore.build_cluster

    def keep(seed: int, options: explore.ExploreOptions):  # type: ignore[no-untyped-def]
        cluster = build(seed, options)
        clusters.append(cluster)
        return cluster

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(explore, "build_cluster", keep)
        result = explore.run_seed(seed, explore.ExploreOptions(transactions=True))
    served = clusters[0].checker.served.values()
    return sorted({v.invariant for v in result.violations}), sum(
        1 for value in served if value.startswith("x"))


def test_explorer_with_transactions_finds_nothing_on_the_real_rule() -> None:
    violations, committed_served = _explore_seed(3)
    assert violations == []
    assert committed_served > 0  # transactions were committed and read under faults


def test_explorer_with_transactions_catches_an_lso_that_ignores_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Partition, "last_stable_offset",
                        property(lambda self: self.high_watermark))
    violations, _served = _explore_seed(3)
    assert "read-committed" in violations
