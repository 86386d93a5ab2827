"""The model checker's transactional steps (issue 15 item 4).

Transactional acks=all produces, the coordinator's commit/abort decision, markers written by
whichever replica leads (``write_marker_as_leader``) and leader changes, over the real core: the
LSO, the producer state and ``records.AbortedTracker``. Invariants: a read_committed reader never
sees an aborted record or one of an open transaction; a committed transaction is all-or-nothing.
The bound ``max_epoch=2`` allows one controller change after the topic's creation (a fence or a
leadership move: a single failure) at any point of the run. Each invariant is shown to catch a
broken core (mutations patched into the running classes).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from floodmark.mc.checker import check
from floodmark.mc.model import Model, ModelConfig
from floodmark.records import AbortedTracker
from floodmark.replication.modes import Truncation
from floodmark.replication.partition import Partition
from floodmark.replication.producer_state import AbortedTxn, ProducerStateTable

SMALL = ModelConfig(Truncation.LEADER_EPOCH, replicas=2, log_size=3, max_epoch=2,
                    max_records=0, transactions=1, txn_records=2)
MIXED = ModelConfig(Truncation.LEADER_EPOCH, replicas=2, log_size=3, max_epoch=2,
                    max_records=1, transactions=1, txn_records=2)


def _kinds(result: Any) -> list[str]:
    return [s.action.kind for s in result.trace if s.action is not None]


def test_the_real_core_keeps_both_transaction_invariants() -> None:
    for config in (SMALL, MIXED):
        result = check(config, max_states=200_000, time_limit_s=math.inf)
        assert result.complete and result.violation is None, (config, result.violation)
        assert result.states > 1000


def test_the_steps_reach_commits_and_aborts_after_a_leader_change() -> None:
    """Breadth-first over the model itself: COMMIT and ABORT markers become committed (below a
    leader's HW), written in the first leader epoch and in the one after a leader change."""
    model = Model(SMALL)
    init = model.initial_state()
    seen = {model.key(init)}
    frontier = [init]
    reached: set[tuple[str, bool]] = set()
    while frontier:
        following = []
        for state in frontier:
            for _action, succ in model.successors(state):
                key = model.key(succ)
                if key in seen:
                    continue
                seen.add(key)
                following.append(succ)
                for _o, epoch, rec in succ.committed:
                    if rec < 0:  # a marker, stamped with the epoch of the leader that wrote it
                        reached.add(("commit" if rec == -2 else "abort", epoch >= 1))
        frontier = following
    assert {("commit", False), ("commit", True), ("abort", False), ("abort", True)} <= reached


@contextmanager
def _lso_ignores_open_transactions() -> Iterator[None]:
    with mock.patch.object(Partition, "last_stable_offset",
                           property(lambda self: self.high_watermark)):
        yield


def test_an_lso_that_ignores_open_transactions_is_caught() -> None:
    with _lso_ignores_open_transactions():
        result = check(SMALL, max_states=200_000, time_limit_s=math.inf)
    assert result.violation is not None
    assert result.violation.invariant == "ReadCommittedSeesOnlyCommitted"
    assert "open transaction" in result.violation.detail
    assert "TxnWrite" in _kinds(result)


def test_a_reader_that_keeps_aborted_records_is_caught() -> None:
    with mock.patch.object(AbortedTracker, "skip", lambda self, hdr: bool(hdr.is_control)):
        result = check(SMALL, max_states=200_000, time_limit_s=math.inf)
    assert result.violation is not None
    assert result.violation.invariant == "ReadCommittedSeesOnlyCommitted"
    assert "aborted transaction" in result.violation.detail
    assert "TxnAbort" in _kinds(result) and "WriteMarker" in _kinds(result)


def test_a_commit_indexed_as_an_abort_is_caught_by_all_or_nothing() -> None:
    """The producer state files a COMMIT like an ABORT (an aborted-index entry for it): the
    commit is visible but its records are not."""
    complete = ProducerStateTable._complete

    def files_commits_as_aborts(self: ProducerStateTable, meta: Any, entry: Any,
                                marker_offset: int) -> AbortedTxn | None:
        first = entry.current_txn_first_offset
        out = complete(self, meta, entry, marker_offset)
        if out is None and meta.marker is not None:
            first = marker_offset if first < 0 else first
            return AbortedTxn(meta.producer_id, first, marker_offset, marker_offset + 1)
        return out

    with mock.patch.object(ProducerStateTable, "_complete", files_commits_as_aborts):
        result = check(SMALL, max_states=200_000, time_limit_s=math.inf)
    assert result.violation is not None
    assert result.violation.invariant == "CommittedTransactionAllOrNothing"
    assert "TxnCommit" in _kinds(result)


def test_cli_runs_the_transactional_model() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "floodmark.cli", "sim", "check", "--replicas", "2",
         "--log-size", "3", "--max-epoch", "2", "--max-records", "0", "--transactions", "1",
         "--txn-records", "2", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["transactions"] == 1 and result["violation"] is None
    bad = subprocess.run([sys.executable, "-m", "floodmark.cli", "sim", "check",
                          "--transactions", "9"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
