"""KIP-890 part 1 in the simulator: the partition leader verifies the writer's first
transactional batch of each transaction with the coordinator (``VerifyTxn``, the core's
``verify_partitions``) and appends it only with the guard its producer state still holds
(``replication.produce``, the broker's rule). The explorer's faults and invariants are the
usual ones; ``--transaction-version`` and ``--no-transaction-verification`` choose the world.

Over 100 seeds each (``floodmark sim explore --transactions --seeds 100
--transaction-version N``): 0 violations at version 2 and at version 0, with verification on
and off."""

from __future__ import annotations

import pytest

from floodmark.errors import ErrorCode
from floodmark.replication.transactions.coordinator import TxnCoordinator
from floodmark.sim.partition import explore

SEED = 1


def _trace(options: explore.ExploreOptions) -> tuple[explore.SeedResult, list[str]]:
    result = explore.run_seed(SEED, options, keep_trace=True)
    return result, result.trace


@pytest.mark.parametrize("version", [0, 2])
def test_the_leader_asks_before_each_transactions_first_batch(version: int) -> None:
    result, trace = _trace(explore.ExploreOptions(transactions=True, transaction_version=version))
    assert result.violations == []
    asked = [line for line in trace if "verifies p" in line]
    ended = [line for line in trace if "COMMIT p" in line and "done" in line]
    assert asked and ended
    assert len(asked) >= len(ended)  # each transaction's one record was verified first


def test_without_verification_nobody_is_asked() -> None:
    result, trace = _trace(explore.ExploreOptions(transactions=True, transaction_version=0,
                                                  transaction_verification=False))
    assert result.violations == []
    assert not any("verifies p" in line for line in trace)


def test_a_partition_the_coordinator_denies_gets_nothing(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """A coordinator that never has the partition in the transaction: every first batch is
    refused INVALID_TXN_STATE before the log sees it; the writer aborts and starts over, and
    no transactional record is ever appended (nor acknowledged, nor served)."""
    monkeypatch.setattr(TxnCoordinator, "verify_partitions",
                        lambda self, *a: {p: ErrorCode.INVALID_TXN_STATE for p in a[-1]})
    result, trace = _trace(explore.ExploreOptions(transactions=True))
    assert result.violations == []
    refused = [line for line in trace
               if "verification of" in line and "INVALID_TXN_STATE -> INVALID_TXN_STATE" in line]
    assert refused
    assert not any(" append " in line and ":x" in line for line in trace)


def test_the_world_is_in_the_reproduce_command_and_the_cli_takes_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    from floodmark.cli import main

    default = explore.ExploreOptions(transactions=True)
    assert default.transaction_version == 2 and default.transaction_verification
    assert explore.reproduce_command(4, default).endswith("--transactions")
    old = explore.ExploreOptions(transactions=True, transaction_version=0,
                                 transaction_verification=False)
    assert explore.reproduce_command(4, old).endswith(
        "--transactions --transaction-version 0 --no-transaction-verification")
    assert main(["sim", "explore", "--transactions", "--seeds", "1", "--start-seed", "4",
                 "--transaction-version", "0", "--fault-phase-ms", "500"]) == 0
    assert "transactions at transaction.version 0" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse: one line, exit 2
        main(["sim", "explore", "--transactions", "--transaction-version", "3"])


def test_transactional_records_naming_no_transactional_id_are_refused() -> None:
    """The broker handler's first check, in the simulator's broker too
    (``txn_verification.lacks_transactional_id``): a transactional batch sent without its
    transactional id is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED and not appended; the
    same batch naming its id is verified and appended."""
    from floodmark.constants import ACKS_ALL
    from floodmark.replication.modes import Truncation
    from floodmark.sim.partition.script import Script

    s = Script(("A", "B"), Truncation.LEADER_EPOCH)
    s.boot()
    producer_id, _epoch = s.producer_of("tx-a")
    leader = s.cluster.controller.registration.leader
    sent = s.cluster.producer.send("t0", ACKS_ALL, to=leader, producer_id=producer_id,
                                   sequence=0, transactional=True)
    s.cluster.settle()
    assert s.cluster.producer.outcomes[sent].error is \
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert s.final()["A"]["log"] == []
    s.produce_txn("t0", "tx-a", 0)
    s.replicate("B")
    assert s.acknowledged() == ["t0"]
