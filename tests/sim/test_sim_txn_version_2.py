"""Transaction version 2 (KIP-890 part 2) in the simulator: the explorer's transactional writer
with a coordinator whose clients send EndTxn v5, so every transaction end bumps the producer
epoch and the markers carry the bumped one; the writer takes the answered epoch (sequences from
0). The explorer's faults (crashes, partitions, lost messages, coordinator failovers) and its
invariants (read_committed shows exactly the committed transactions, nothing acknowledged is
lost) are the same as for version 0.

``TV2_SEEDS`` seeds run here (the default suite); the 50-seed run is ``-m slow``."""

from __future__ import annotations

import itertools

import pytest

from floodmark.replication.transactions import log as txn_log
from floodmark.replication.transactions.state import TV_2, TxnState
from floodmark.sim.partition import explore
from floodmark.sim.partition.cluster import Cluster

TV2_SEEDS = 3


def _explore_tv2(monkeypatch: pytest.MonkeyPatch, seeds: range
                 ) -> list[tuple[explore.SeedResult, Cluster]]:
    clusters: list[Cluster] = []
    build = explore.build_cluster

    def keep(seed: int, options: explore.ExploreOptions) -> Cluster:
        cluster = build(seed, options)
        clusters.append(cluster)
        return cluster

    monkeypatch.setattr(explore, "build_cluster", keep)
    results = [explore.run_seed(seed, explore.ExploreOptions(transactions=True,
                                                             transaction_version=TV_2))
               for seed in seeds]
    return list(zip(results, clusters, strict=True))


def _check(runs: list[tuple[explore.SeedResult, Cluster]]) -> None:
    """No seed breaks an invariant; and, over the seeds (a seed whose faults kept the writer
    from ending any transaction proves nothing either way), the transactions ran version 2."""
    bumps = []  # (epoch it ran at, epoch of its Prepare) of each transaction a client ended
    completes = []
    for result, cluster in runs:
        assert result.violations == [], (result.seed, result.violations)
        coordinator = cluster.txn_coordinator()
        assert coordinator.transaction_version == TV_2
        written = [m for batch in coordinator.log
                   for m in txn_log.replay([batch]).transactions.values()]
        for before, m in itertools.pairwise(written):
            if (m.state.is_prepare and m.partitions and before.state is TxnState.ONGOING
                    and before.transactional_id == m.transactional_id
                    and m.client_transaction_version == TV_2):
                bumps.append((before.producer_epoch, m.producer_epoch))
        completes += [(result.seed, m) for m in written if m.state.is_complete]
    # the transactions the writer ended itself were prepared under version 2, one epoch above
    # the one they ran at (a fence of a timed-out one is version 0)
    assert bumps
    assert all(prepared == ran + 1 for ran, prepared in bumps), bumps
    assert any(m.state is TxnState.COMPLETE_COMMIT for _, m in completes)
    assert any(m.state is TxnState.COMPLETE_ABORT for _, m in completes)
    # the epoch climbs with the transactions of one producer id (a bump per EndTxn)
    by_pid: dict[tuple[int, int], set[int]] = {}
    for seed, m in completes:
        by_pid.setdefault((seed, m.producer_id), set()).add(m.producer_epoch)
    assert max(len(e) for e in by_pid.values()) > 1


def test_explorer_transactions_with_version_2(monkeypatch: pytest.MonkeyPatch) -> None:
    _check(_explore_tv2(monkeypatch, range(1, 1 + TV2_SEEDS)))


@pytest.mark.slow
def test_explorer_transactions_with_version_2_fifty_seeds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _check(_explore_tv2(monkeypatch, range(1, 51)))
