"""The simulator's transactions are decided by the broker's transaction coordinator core
(``replication.transactions``), not by a coordinator of its own (issue 15, item 4): the objects
are the broker's, a change to the core changes what the simulator sees, and a coordinator crash
after PrepareCommit is finished by a new coordinator from the log (all-or-nothing)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from floodmark.broker.txn_coordinator import BrokerTxnCoordinator
from floodmark.replication.modes import Truncation
from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.coordinator import TxnCoordinator, TxnEffect
from floodmark.replication.transactions.state import TxnMetadata, TxnState
from floodmark.sim.partition import explore
from floodmark.sim.partition.cluster import Cluster
from floodmark.sim.partition.scenarios import run_scenario
from floodmark.sim.partition.txn_coordinator import SimTxnCoordinator


def _scenario_coordinator(monkeypatch: pytest.MonkeyPatch, name: str
                          ) -> tuple[Any, SimTxnCoordinator]:
    made: list[Cluster] = []
    original = Cluster.__init__

    def keep(self: Cluster, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Cluster, "__init__", keep)
    result = run_scenario(name, Truncation.LEADER_EPOCH)
    return result, made[0].txn_coordinator()


def test_the_scenario_runs_the_brokers_core_and_its_log(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    result, coordinator = _scenario_coordinator(monkeypatch, "transaction-visibility")
    assert result.as_expected, result.verdict
    host = SimpleNamespace(node_id=0, membership=SimpleNamespace(broker_address=lambda _: None),
                           config=None)
    driver = BrokerTxnCoordinator(cast(Any, host), cast(Any, None), max_timeout_ms=1,
                                  cleanup_interval_ms=1)
    assert type(coordinator.core) is type(driver.core) is TxnCoordinator
    # Its log is ``__transaction_state`` as the broker writes it: the codec replays it.
    replayed = txn_log.replay(coordinator.log)
    assert replayed.unreadable == 0
    assert {k: (m.state, m.producer_id) for k, m in replayed.transactions.items()} == {
        "tx-a": (TxnState.COMPLETE_ABORT, 7), "tx-b": (TxnState.COMPLETE_COMMIT, 8)}
    # Each record, in order, is a state the core's table allows after the one before.
    history: dict[str, list[TxnState]] = {}
    for batch in coordinator.log:
        for txn_id, m in txn_log.replay([batch]).transactions.items():
            history.setdefault(txn_id, []).append(m.state)
    assert history["tx-b"] == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                               TxnState.COMPLETE_COMMIT]
    assert history["tx-a"][-2:] == [TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT]


def test_a_change_to_the_core_changes_the_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    """If the core turned every commit into an abort, the simulator's consumer would never
    see t2: the decision is the core's, not the simulator's."""
    end_txn = TxnCoordinator.end_txn

    def always_abort(self: TxnCoordinator, request_id: int, txn_partition: int,
                     transactional_id: str, producer_id: int, producer_epoch: int,
                     committed: bool, now_ms: int, **version: int) -> list[TxnEffect]:
        return end_txn(self, request_id, txn_partition, transactional_id, producer_id,
                       producer_epoch, False, now_ms, **version)

    monkeypatch.setattr(TxnCoordinator, "end_txn", always_abort)
    result = run_scenario("transaction-visibility", Truncation.LEADER_EPOCH)
    assert not result.as_expected
    assert result.facts["reads"][-1] == ["p0", "p1"]
    assert result.facts["violations"] == []  # the checker learnt the abort from the log


def test_coordinator_crash_after_prepare_commit_is_finished_from_the_log() -> None:
    result = run_scenario("coordinator-failover", Truncation.LEADER_EPOCH)
    assert result.as_expected, result.verdict
    assert result.facts["reads"] == [["p0"], ["p0", "t1", "t2"]]


def test_a_coordinator_that_forgets_prepared_commits_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new coordinator that did not resend the markers of a PrepareCommit would leave a
    committed transaction unreadable for ever: the all-or-nothing invariant says so."""
    load = TxnCoordinator.load

    def forgetful(self: TxnCoordinator, txn_partition: int, coordinator_epoch: int,
                  transactions: dict[str, TxnMetadata], now_ms: int) -> list[TxnEffect]:
        load(self, txn_partition, coordinator_epoch, transactions, now_ms)
        return []

    monkeypatch.setattr(TxnCoordinator, "load", forgetful)
    result = run_scenario("coordinator-failover", Truncation.LEADER_EPOCH)
    assert not result.as_expected
    assert result.facts["reads"][-1] == ["p0"]
    assert "txn-all-or-nothing" in result.facts["violations"]


def test_explorer_transactions_go_through_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    clusters: list[Cluster] = []
    build = explore.build_cluster

    def keep(seed: int, options: explore.ExploreOptions) -> Cluster:
        cluster = build(seed, options)
        clusters.append(cluster)
        return cluster

    monkeypatch.setattr(explore, "build_cluster", keep)
    result = explore.run_seed(1, explore.ExploreOptions(transactions=True))
    assert result.violations == []
    coordinator = clusters[0].txn_coordinator()
    assert isinstance(coordinator.core, TxnCoordinator)
    assert coordinator.crashes >= 1  # and new coordinators finished from the log
    assert coordinator.coordinator_epoch == coordinator.crashes
    states = [m.state for batch in coordinator.log
              for m in txn_log.replay([batch]).transactions.values()]
    assert states.count(TxnState.COMPLETE_COMMIT) > 0
    assert states.count(TxnState.COMPLETE_ABORT) > 0
    # Every marker a leader acknowledged was asked for by the core (SendMarkers).
    assert len(coordinator.acknowledged) >= (states.count(TxnState.COMPLETE_COMMIT)
                                             + states.count(TxnState.COMPLETE_ABORT))
