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


def test_pipelined_batches_keep_their_order_through_verification() -> None:
    """librdkafka's 0103 (``do_test_fatal_idempo_error_without_kip360``) and confluent-kafka's
    ``test_commit_transaction``, replayed step by step: seq 1 arrives while seq 0 waits for the
    coordinator and asks it too; seq 0 is verified and appended, opening the transaction; seq 2
    arrives while seq 1's question is still out. Without the produce order
    (``replication/produce_order.py``) seq 2 skips verification (the transaction is open) and
    meets the sequence check before seq 1 is appended: OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to
    the client. With it, seq 2 waits behind seq 1, and all three append in order."""
    from floodmark.constants import ACKS_LEADER
    from floodmark.replication.modes import Truncation
    from floodmark.sim.partition import messages as m
    from floodmark.sim.partition.script import Script

    s = Script(("b1", "b2", "b3"), Truncation.LEADER_EPOCH)
    s.boot()
    pid, epoch = s.producer_of("tx")
    s._must(m.AddPartitionsToTxn(0, "tx", pid, epoch))
    world, net, producer = s.cluster.world, s.cluster.net, s.cluster.producer
    coordinator = s._coordinator().name
    leader = s.cluster.controller.registration.leader

    def send(sequence: int) -> int:
        return producer.send(f"x{sequence}", ACKS_LEADER, to=leader, producer_id=pid,
                             producer_epoch=epoch, sequence=sequence, transactional=True,
                             transactional_id="tx")

    # Before the produce order (the trace of that code, 1 ms per hop): 11 the leader asks about
    # seq 0; 12 it asks about seq 1; 13 seq 0 appended, then seq 2 arrives, finds the
    # transaction open and is refused OUT_OF_ORDER_SEQUENCE_NUMBER; 14 seq 1 appended.
    net.pause(coordinator)  # seq 0's question waits at the coordinator
    t = world.now_ms
    first = send(0)
    world.run_until(t + 1)  # seq 0 at the leader, its question held
    net.resume(coordinator)
    second = send(1)  # arrives while seq 0's question is out
    world.run_until(t + 2)
    net.pause(coordinator)  # seq 1's question (if it asks) stays out
    third = send(2)  # arrives just after seq 0 is appended
    world.run_until(t + 3)
    net.resume(coordinator)
    world.run_until_idle()
    outcomes = [producer.outcomes[i] for i in (first, second, third)]
    assert [o.error for o in outcomes] == [ErrorCode.NONE] * 3, outcomes
    assert [o.offset for o in outcomes] == sorted(o.offset for o in outcomes)
    assert any("holds x1 of p" in line for line in world.trace)  # it waited its turn
    b1 = s.cluster.broker("b1")
    assert len(b1.produces.gate.order) == 0 and not b1.produces.gated  # nothing left held
