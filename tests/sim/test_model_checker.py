"""The explicit-state model checker: proofs in leader-epoch mode, shortest counterexamples in the
historical modes, and mutation tests showing that breaking the real rule code is caught."""

from __future__ import annotations

import json
import math

import pytest

from floodmark.cli import main
from floodmark.mc.checker import CheckResult, check, replay
from floodmark.mc.model import ModelConfig
from floodmark.replication import isr as isr_rules
from floodmark.replication import partition as core
from floodmark.replication import truncation as rules
from floodmark.replication.epochs import EpochCache, EpochEndOffset
from floodmark.replication.modes import Truncation

HW = Truncation.HIGH_WATERMARK
EO = Truncation.EPOCH_OFFSET
LE = Truncation.LEADER_EPOCH


def assert_valid_trace(result: CheckResult) -> None:
    """Every step of the counterexample is a transition a fresh model offers, to the same state."""
    assert result.trace[0].action is None
    actions = [step.action for step in result.trace[1:] if step.action is not None]
    assert len(actions) == len(result.trace) - 1
    assert replay(result.config, actions) == [step.state for step in result.trace]


def committed_records(result: CheckResult) -> set[tuple[int, int, int]]:
    return set(result.trace[-1].state.committed)


# -- proofs ------------------------------------------------------------------------------------
# A proof is bounded by the states it may visit, never by the clock: the same bound holds on a
# quiet machine and a loaded one. The bounds below are about twice the reachable states (9,494;
# 47,264; 7,615; 57,356): a model that grows past them fails as incomplete, and is looked at.
PROOF_MAX_STATES = 120_000


@pytest.mark.parametrize(
    ("replicas", "log_size", "max_epoch", "async_isr"),
    [
        (2, 2, 3, True),
        (2, 2, 4, True),
        (2, 2, 3, False),
        (3, 2, 2, False),
    ],
)
def test_leader_epoch_mode_holds_exhaustively(
    replicas: int, log_size: int, max_epoch: int, async_isr: bool
) -> None:
    config = ModelConfig(
        LE, replicas=replicas, log_size=log_size, max_epoch=max_epoch, async_isr=async_isr
    )
    result = check(config, max_states=PROOF_MAX_STATES, time_limit_s=math.inf)
    assert result.violation is None, result.violation
    assert result.complete, f"more than {PROOF_MAX_STATES} states: {result.states}"
    assert result.holds
    assert result.states > 1_000 and result.depth > 10


@pytest.mark.slow
# An exhaustive bound is CPU work: 3-2-3-True is ~240 CPU-seconds but took 27 wall minutes on a
# loaded 2-core machine. The check is bounded by states (the checker's default bound), not by
# the clock; the soak's timeout only guards against a hang.
@pytest.mark.timeout(7200)
@pytest.mark.parametrize(
    ("replicas", "log_size", "max_epoch", "async_isr"),
    [(3, 2, 2, True), (2, 3, 4, True), (3, 1, 3, True), (3, 2, 3, False), (3, 2, 3, True)],
)
def test_leader_epoch_mode_holds_bigger_bounds(
    replicas: int, log_size: int, max_epoch: int, async_isr: bool
) -> None:
    config = ModelConfig(
        LE, replicas=replicas, log_size=log_size, max_epoch=max_epoch, async_isr=async_isr
    )
    result = check(config, time_limit_s=math.inf)
    assert result.violation is None, result.violation
    assert result.holds


# -- historical counterexamples ----------------------------------------------------------------
@pytest.mark.parametrize("fencing", [True, False])
def test_high_watermark_mode_loses_committed_record(fencing: bool) -> None:
    """KIP-101 scenario 1: a follower truncates to its stale HW and drops a committed record."""
    result = check(ModelConfig(HW, replicas=2, log_size=2, max_epoch=3, fencing=fencing))
    assert result.violation is not None
    assert result.violation.invariant == "StrongIsr"
    assert len(result.trace) - 1 == result.depth == 8
    assert_valid_trace(result)
    last = result.trace[-1]
    assert last.action is not None and last.action.kind == "ApplyMetadata"
    before = result.trace[-2].state.replicas[last.action.replica]
    after = last.state.replicas[last.action.replica]
    assert after.leo == before.hw < before.leo  # cut to its own (stale) HW
    offset, epoch, record = min(committed_records(result))
    assert before.log[offset] == (epoch, record) and after.leo <= offset


@pytest.mark.parametrize(("fencing", "steps"), [(True, 12), (False, 11)])
def test_epoch_offset_mode_kip101_fast_leader_changes(fencing: bool, steps: int) -> None:
    """KIP-101 as shipped: after epochs 0 (A), 1 (B), 2 (A) the leader cannot answer for epoch 1
    and the follower falls back to its HW, truncating a committed record (with or without
    KIP-320 fencing: the broker fences in every mode, Kafka 0.11 did not)."""
    result = check(ModelConfig(EO, replicas=2, log_size=2, max_epoch=3, fencing=fencing))
    assert result.violation is not None
    assert result.violation.invariant == "StrongIsr"
    assert len(result.trace) - 1 == result.depth == steps
    assert_valid_trace(result)
    last = result.trace[-1]
    assert last.action is not None and last.action.kind == "OffsetsForLeaderEpoch"
    follower = last.action.replica
    assert result.trace[-2].state.replicas[follower].leo > last.state.replicas[follower].leo
    elected = [
        s.action.replica for s in result.trace if s.action and s.action.kind == "MoveLeadership"
    ]
    assert elected == [1, 0]  # epochs 0 (A, at creation), 1 (B), 2 (A)
    # The same bound is safe under the leader-epoch rules.
    assert check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3)).holds


def test_high_watermark_mode_three_replicas() -> None:
    result = check(ModelConfig(HW, replicas=3, log_size=1, max_epoch=3))
    assert result.violation is not None and result.depth == 10
    assert_valid_trace(result)


def test_kip279_without_fencing_fails_with_three_replicas() -> None:
    """verification.md §2.2: a follower truncates against a stale leader that never took over;
    KIP-320 fencing (on in leader-epoch mode) is what prevents it."""
    config = ModelConfig(LE, replicas=3, log_size=1, max_epoch=3, fencing=False, async_isr=False)
    result = check(config)
    assert result.violation is not None
    assert result.violation.invariant == "StrongIsr"
    assert len(result.trace) - 1 == 10
    assert_valid_trace(result)
    last = result.trace[-1]
    assert last.action is not None and last.action.kind == "Fetch"
    stale_leader = last.state.replicas[last.action.arg]
    assert stale_leader.leader_epoch < last.state.controller.registration.leader_epoch
    assert last.state.replicas[last.action.replica].leo == 0


def test_without_fencing_a_stale_become_leader_rewrites_the_epoch_cache() -> None:
    """Two replicas, no fencing: B replicates r0 (epoch 2) while itself in epoch 0, then applies
    the stale epoch-1 request as leader; KAFKA-7415's assign(1, LEO) drops its epoch-2 entry,
    so its next diverging fetch cuts committed r0. Fencing makes the epoch-0 fetch impossible."""
    result = check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3, fencing=False))
    assert result.violation is not None
    assert result.violation.invariant == "StrongIsr"
    assert len(result.trace) - 1 == 11
    assert_valid_trace(result)
    kinds = [s.action.kind for s in result.trace[1:] if s.action is not None]
    assert kinds[-1] == "Fetch" and kinds.count("MoveLeadership") == 2


# -- mutations of the real rule code -----------------------------------------------------------
def test_mutated_truncation_point_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trusting only the leader's offset (dropping the KIP-279 epoch comparison) gets stuck."""

    def offset_only(
        mode: Truncation, cache: EpochCache, leo: int, hw: int, answer: EpochEndOffset
    ) -> rules.TruncationPoint:
        return rules.TruncationPoint(min(answer.end_offset, leo), final=True)

    monkeypatch.setattr(core, "truncation_point", offset_only)
    result = check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3))
    assert result.violation is not None
    assert result.violation.invariant == "TruncationProgress"
    assert_valid_trace(result)


def test_mutated_validate_fetch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def never_diverges(
        mode: Truncation, cache: EpochCache, start: int, leo: int, offset: int, epoch: int
    ) -> rules.FetchCheck:
        return rules.FETCH_OK if offset <= leo else rules.FETCH_OUT_OF_RANGE

    monkeypatch.setattr(core, "validate_fetch", never_diverges)
    result = check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3))
    assert result.violation is not None
    assert_valid_trace(result)


def test_mutated_epoch_cache_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    original = EpochCache.end_offset_for

    def ends_at_leo(self: EpochCache, epoch: int, leo: int) -> EpochEndOffset:
        answer = original(self, epoch, leo)
        return answer if answer.is_undefined else EpochEndOffset(answer.epoch, leo)

    monkeypatch.setattr(EpochCache, "end_offset_for", ends_at_leo)
    result = check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3))
    assert result.violation is not None
    assert_valid_trace(result)


def test_isr_expansion_without_leso_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """KAFKA-7128: expanding the ISR with a follower below the leader's epoch start offset lets
    an ISR member miss records a previous leader committed."""
    real = isr_rules.can_expand_isr

    def without_leso(state: isr_rules.IsrState, follower: isr_rules.ReplicaState, *,
                     high_watermark: int, leader_epoch_start_offset: int, eligible: bool) -> bool:
        return real(state, follower, high_watermark=high_watermark, leader_epoch_start_offset=0,
                    eligible=eligible)

    monkeypatch.setattr(isr_rules, "can_expand_isr", without_leso)
    result = check(ModelConfig(LE, replicas=3, log_size=2, max_epoch=2, async_isr=False))
    assert result.violation is not None
    assert result.violation.invariant == "StrongIsr"
    # The new leader adds a follower below its epoch start offset on a fetch whose answer is
    # lost: the follower is in the ISR without the records the old leader committed.
    assert result.trace[-1].action is not None
    assert result.trace[-1].action.kind == "FetchResponseLost"
    assert_valid_trace(result)


# -- unclean restarts (outside what the protocol promises) -------------------------------------
def test_unclean_restart_of_sole_isr_member_loses_committed_data() -> None:
    """RF=2, min ISR 1: a restart that loses unflushed data exceeds the f = RF - minISR = 1
    budget for data loss; the checker shows the loss in every mode, even leader-epoch."""
    result = check(ModelConfig(LE, replicas=2, unclean_restarts=1))
    assert result.violation is not None
    assert result.violation.invariant == "NoCommittedRecordLost"
    assert any(s.action is not None and s.action.kind == "UncleanRestart" for s in result.trace)
    assert_valid_trace(result)


def test_last_replica_standing_three_replicas_min_isr_two() -> None:
    """KIP-966 / T14: even with RF=3, min ISR 2 and a single unclean restart, the leader-epoch
    rules without ELR expose a committed record missing from an ISR member."""
    config = ModelConfig(
        LE, replicas=3, log_size=1, min_insync_replicas=2, unclean_restarts=1, async_isr=False
    )
    result = check(config)
    assert result.violation is not None
    assert any(s.action is not None and s.action.kind == "UncleanRestart" for s in result.trace)
    assert_valid_trace(result)


# -- bounds and CLI ----------------------------------------------------------------------------
def test_bounded_search_never_claims_to_hold() -> None:
    result = check(ModelConfig(LE, replicas=2), max_states=100)
    assert not result.complete and not result.holds and result.violation is None
    assert result.states == 100


def test_cli_json_counterexample(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "check", "--truncation", "high-watermark", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["truncation"] == "high-watermark" and out["replicas"] == 2
    assert out["holds"] is False and out["states"] > 0 and out["depth"] == 8
    assert out["seconds"] >= 0
    violation = out["violation"]
    assert violation["invariant"] == "StrongIsr"
    assert len(violation["trace"]) == 9
    step = violation["trace"][-1]
    assert set(step["replicas"]) == {"A", "B"}
    assert {"log", "leo", "hw", "epochs"} <= set(step["replicas"]["A"])
    assert step["replicas"]["A"]["log"] == [[0, 0, "r0"]]


def test_cli_json_holds(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "check", "--truncation", "leader-epoch", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["holds"] is True and out["violation"] is None and out["complete"] is True


def test_cli_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "check", "--truncation", "epoch-offset", "--replicas", "2"])
    text = capsys.readouterr().out
    assert code == 1
    assert "states explored:" in text and "states/s" in text and "depth:" in text
    assert "verdict: VIOLATED StrongIsr" in text
    assert "shortest counterexample (12 steps)" in text
    assert "0:e0:r0" in text and "epochs={" in text and "LEO=" in text and "HW=" in text


def test_cli_incomplete_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "check", "--max-states", "50"])
    assert code == 3
    assert "INCOMPLETE" in capsys.readouterr().out


def test_shrink_applied_before_the_controller_agrees_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Maximal ISR (§3.2/§3.4): a leader that stops waiting for a member it only *proposed* to
    remove no longer covers the controller's ISR."""
    monkeypatch.setattr(isr_rules.PendingShrinkIsr, "maximal_isr",
                        property(lambda self: self.proposed_isr))
    result = check(ModelConfig(LE, replicas=2, log_size=2, max_epoch=3))
    assert result.violation is not None
    assert result.violation.invariant == "ReplicationQuorumSuperset"
    assert result.trace[-1].action is not None
    assert result.trace[-1].action.kind == "LeaderShrinkIsr"
