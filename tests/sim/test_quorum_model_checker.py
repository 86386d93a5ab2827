"""The quorum model checker (``floodmark sim check-quorum``): exhaustive over small bounds, run by
the controller's own ``QuorumCore`` and ``QuorumDriver``, and able to catch unsafe variants of
them (each mutation patches the running code where the core looks it up)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable

import pytest

from floodmark.cli.main import main
from floodmark.controller.quorum import core as quorum_core
from floodmark.controller.quorum.driver import QuorumDriver
from floodmark.controller.quorum.effects import PersistElectionState, QuorumEffect
from floodmark.controller.quorum.roles import Leader
from floodmark.controller.quorum.rules import majority_end_offset
from floodmark.mc.quorum import voter as quorum_voter
from floodmark.mc.quorum.checker import QuorumResult, check
from floodmark.mc.quorum.model import Action, QuorumModel, QuorumModelConfig, StateView
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
    """Two voters, two elections, one client record, one message in flight at a time."""
    model, result = check(QuorumModelConfig(voters=2, max_epoch=2, max_records=1,
                                            max_in_flight=1), time_limit_s=math.inf)
    assert result.violation is None
    assert result.complete and result.holds
    assert result.states > 20_000
    # The search really elected leaders in both epochs and committed the client record.
    views = [model.voter(v) for v in range(len(model._voters.values))]
    assert {v.epoch for v in views if isinstance(v.role, Leader)} == {1, 2}
    assert any(v.is_leader and v.high_watermark == 2 and v.log[1][1] == "m0" for v in views)


@pytest.mark.slow
@pytest.mark.parametrize(("voters", "max_epoch", "max_records", "max_crashes", "states"), [
    (2, 2, 1, 1, 100_000),
    (3, 1, 0, 0, 1_000_000),
])
def test_larger_bounds_hold_exhaustively(voters: int, max_epoch: int, max_records: int,
                                         max_crashes: int, states: int) -> None:
    _model, result = check(QuorumModelConfig(voters=voters, max_epoch=max_epoch,
                                             max_records=max_records, max_crashes=max_crashes,
                                             max_in_flight=1), time_limit_s=math.inf)
    assert result.holds, result.violation
    assert result.states > states


def test_a_minority_quorum_elects_two_leaders_in_one_epoch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_core, "majority", lambda voters: voters // 2)
    config = QuorumModelConfig(voters=2, max_epoch=1, max_records=0)
    model, result = check(config, time_limit_s=math.inf)
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
    assert out["holds"] and out["complete"] and out["states"] > 1_000
    assert main(["sim", "check-quorum", "--max-states", "50"]) == 3
    assert "INCOMPLETE" in capsys.readouterr().out
    assert main(["sim", "check-quorum", "--voters", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--voters" in err


class Script:
    """Drives a fresh model through chosen actions (each must be offered by the model): the
    prefix that an exhaustive search then starts from."""

    def __init__(self, config: QuorumModelConfig) -> None:
        self.model = QuorumModel(config)
        self.state = self.model.initial_state()
        self.actions: list[Action] = []

    def _take(self, wanted: Callable[[Action], bool], what: str) -> None:
        for action, state in self.model.successors(self.state):
            if action.crash_at < 0 and wanted(action):
                self.state = state
                self.actions.append(action)
                return
        raise AssertionError(f"not offered: {what}; in flight: "
                             f"{[m[:3] for m in self.model.view(self.state).network]}")

    def timer(self, voter: int, now_ms: int) -> None:
        self._take(lambda a: a.kind == "Timer" and a.voter == voter and a.arg == now_ms,
                   f"timer {now_ms} at c{voter}")

    def deliver(self, dst: int, kind: str) -> None:
        self._take(lambda a: a.kind == "Deliver" and a.voter == dst and a.message is not None
                   and type(a.message[2]).__name__ == kind, f"{kind} to c{dst}")

    def drop(self, dst: int, kind: str) -> None:
        self._take(lambda a: a.kind == "Drop" and a.voter == dst and a.message is not None
                   and type(a.message[2]).__name__ == kind, f"lose {kind} to c{dst}")

    def elect_c1_and_commit_on_c2(self) -> None:
        """c1 wins epoch 1 with c2's votes, c3 learns it (BeginQuorumEpoch) without fetching,
        c2 fetches c1's leader-change record twice: c1's HW is 1 (committed on c1 and c2)."""
        self.timer(1, 2)  # election timeout: Prospective, pre-votes to c2 and c3
        self.deliver(2, "VoteRequest")
        self.deliver(1, "VoteResponse")  # Candidate in epoch 1
        self.deliver(2, "VoteRequest")
        self.deliver(1, "VoteResponse")  # Leader of epoch 1, LC(c1) at offset 0
        self.deliver(3, "VoteRequest")  # the old pre-vote request
        self.drop(1, "VoteResponse")  # (a leader ignores it)
        self.deliver(2, "BeginQuorumEpochRequest")
        self.deliver(1, "BeginQuorumEpochResponse")
        self.timer(1, 1)  # BeginQuorumEpoch again to c3
        self.deliver(3, "BeginQuorumEpochRequest")
        self.deliver(1, "BeginQuorumEpochResponse")
        for _ in range(2):
            self.timer(2, 1)  # c2 fetches
            self.deliver(1, "QuorumFetchRequest")
            self.deliver(2, "QuorumFetchResponse")
        view = self.model.view(self.state)
        assert view.committed == ((0, 1, "LC(c1)"),) and view.voters[2].log == ()


def test_a_voter_that_skips_the_log_check_elects_a_leader_without_committed_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Raft's §5.4.1 vote restriction off (``rules.log_is_up_to_date`` always true, where the
    core looks it up): from a committed record on c1 and c2, the search finds c3 — whose log is
    empty — elected in epoch 2 with c2's vote."""
    config = QuorumModelConfig(voters=3, max_epoch=2, max_records=0, max_in_flight=2)
    script = Script(config)
    script.elect_c1_and_commit_on_c2()
    monkeypatch.setattr(quorum_core, "log_is_up_to_date", lambda *_args: True)
    model, result = check(config, prefix=script.actions, time_limit_s=math.inf)
    assert result.violation is not None
    assert result.violation.invariant == "leader-completeness"
    assert _replay(config, result) == [model.view(s) for _a, s in result.path]
    print(result_text(model, result))


def _figure_8_prefix(config: QuorumModelConfig) -> Script:
    """Raft's Figure 8 on three voters: c1 leads epoch 1 (its LC at 0 reaches nobody), c2
    leads epoch 2 with c3's vote (its LC at 0 reaches nobody), c1 leads epoch 3 with c3's vote
    and appends LC at 1; c3 fetches epoch 1's record at 0, then reports offset 1 (the answer,
    with epoch 3's record, is lost)."""
    script = Script(config)
    script.timer(1, 2)
    script.deliver(2, "VoteRequest")
    script.deliver(1, "VoteResponse")
    script.deliver(2, "VoteRequest")
    script.deliver(1, "VoteResponse")  # c1 leads epoch 1
    script.drop(3, "VoteRequest")
    script.drop(2, "BeginQuorumEpochRequest")
    script.timer(2, 2)  # c2: Prospective in epoch 1
    script.drop(1, "VoteRequest")
    script.deliver(3, "VoteRequest")
    script.deliver(2, "VoteResponse")  # c2: Candidate in epoch 2
    script.deliver(3, "VoteRequest")
    script.deliver(2, "VoteResponse")  # c2 leads epoch 2
    while script.model.view(script.state).network:
        script._take(lambda a: a.kind == "Drop", "lose whatever is in flight")
    script.timer(1, 2)  # c1's check quorum: Resigned
    while script.model.view(script.state).network:
        script._take(lambda a: a.kind == "Drop", "lose whatever is in flight")
    script.timer(1, 2)  # Prospective in epoch 1: asks c2 and c3
    script.drop(2, "VoteRequest")
    script.deliver(3, "VoteRequest")
    script.deliver(1, "VoteResponse")  # refused, but c1 learns epoch 2
    script.timer(1, 2)  # Prospective in epoch 2
    script.drop(2, "VoteRequest")
    script.deliver(3, "VoteRequest")
    script.deliver(1, "VoteResponse")  # Candidate in epoch 3
    script.deliver(3, "VoteRequest")
    script.deliver(1, "VoteResponse")  # c1 leads epoch 3: [0:e1:LC(c1), 1:e3:LC(c1)]
    while script.model.view(script.state).network:
        script._take(lambda a: a.kind == "Drop", "lose whatever is in flight")
    script.timer(1, 1)  # BeginQuorumEpoch again
    script.drop(2, "BeginQuorumEpochRequest")
    script.deliver(3, "BeginQuorumEpochRequest")
    script.drop(1, "BeginQuorumEpochResponse")
    script.timer(3, 1)
    script.deliver(1, "QuorumFetchRequest")
    script.deliver(3, "QuorumFetchResponse")  # c3: [0:e1:LC(c1)]
    script.timer(3, 1)
    script.deliver(1, "QuorumFetchRequest")  # c1 hears that c3's log ends at 1
    script.drop(3, "QuorumFetchResponse")
    return script


def test_the_epoch_start_rule_keeps_an_old_epochs_record_uncommitted() -> None:
    config = QuorumModelConfig(voters=3, max_epoch=4, max_records=0, max_in_flight=2)
    script = _figure_8_prefix(config)
    view = script.model.view(script.state)
    assert view.voters[2].log == ((1, "LC(c1)"),)
    assert view.voters[0].high_watermark == 0 and view.committed == ()


def test_a_leader_that_commits_an_old_epochs_record_by_counting_loses_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Raft's §5.4.2 rule (the commit index moves only past the leader's own epoch
    start: ``rules.leader_high_watermark``), c1 commits epoch 1's record once c3 holds it, and
    the search finds c2 (last epoch 2) elected in epoch 4 with c3's vote, without it."""
    def without_epoch_start_rule(current: int, _epoch_start: int, flushed: int,
                                 others: Iterable[int]) -> int:
        return max(current, majority_end_offset([flushed, *others]))

    monkeypatch.setattr(quorum_core, "leader_high_watermark", without_epoch_start_rule)
    config = QuorumModelConfig(voters=3, max_epoch=4, max_records=0, max_in_flight=2)
    script = _figure_8_prefix(config)
    assert script.model.view(script.state).committed == ((0, 1, "LC(c1)"),)
    model, result = check(config, prefix=script.actions, time_limit_s=math.inf)
    print(result_text(model, result))
    assert result.violation is not None
    assert result.violation.invariant == "leader-completeness"


class ForgetfulDriver(QuorumDriver):
    """A driver that never writes the ``quorum-state`` file (it drops PersistElectionState):
    a restarted voter has forgotten the vote it cast."""

    def apply(self, effects: Iterable[QuorumEffect], now_ms: int, records: bytes = b"") -> None:
        super().apply([e for e in effects if not isinstance(e, PersistElectionState)], now_ms,
                      records)


_FORGET_CONFIG = QuorumModelConfig(voters=3, max_epoch=1, max_records=0, max_crashes=1,
                                   max_in_flight=1)


def _c2_voted_for_c1_and_restarted() -> list[Action]:
    script = Script(_FORGET_CONFIG)
    script.timer(1, 2)
    script.deliver(2, "VoteRequest")
    script.deliver(1, "VoteResponse")
    script.deliver(2, "VoteRequest")
    script.deliver(1, "VoteResponse")  # c1 leads epoch 1 with c2's vote
    script._take(lambda a: a.kind == "Crash" and a.voter == 2, "c2 crashes")
    script._take(lambda a: a.kind == "Start" and a.voter == 2, "c2 restarts")
    return script.actions


def test_a_vote_that_is_not_persisted_elects_two_leaders_in_one_epoch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """c2 votes for c1 in epoch 1, crashes and restarts: without its vote on disk
    (``ForgetfulDriver``) the search finds a second leader of epoch 1."""
    monkeypatch.setattr(quorum_voter, "QuorumDriver", ForgetfulDriver)
    model, result = check(_FORGET_CONFIG, prefix=_c2_voted_for_c1_and_restarted(),
                          time_limit_s=math.inf)
    assert result.violation is not None and result.violation.invariant == "election-safety"
    assert _replay(_FORGET_CONFIG, result) == [model.view(s) for _a, s in result.path]


@pytest.mark.slow
def test_a_persisted_vote_keeps_one_leader_per_epoch_across_a_restart() -> None:
    """The control of the test above: the real driver, the same prefix, the whole space below
    it (about 120,000 states) holds."""
    _model, result = check(_FORGET_CONFIG, prefix=_c2_voted_for_c1_and_restarted(),
                           time_limit_s=math.inf)
    assert result.holds, result.violation
    assert result.states > 100_000


def test_cli_prints_a_counterexample_step_by_step(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(quorum_core, "majority", lambda voters: voters // 2)
    args = ["sim", "check-quorum", "--voters", "2", "--max-epoch", "1", "--max-records", "0"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "verdict: VIOLATED election-safety: epoch 1 has leaders c1 and c2" in out
    assert " 0. 2 voters start on empty disks" in out
    assert " 2. c2: an election, fetch or check-quorum timeout fires -> leader epoch 1" in out
    assert main([*args, "--json"]) == 1
    violation = json.loads(capsys.readouterr().out)["violation"]
    assert violation["invariant"] == "election-safety"
    assert [step["kind"] for step in violation["trace"]] == ["Init", "Timer", "Timer"]
    assert violation["trace"][-1]["voters"]["c2"]["role"] == "Leader"


def test_voter_changes_hold_exhaustively_and_a_removed_leader_hands_over() -> None:
    """KIP-853: c1 alone is the bootstrap voter set, c2 an observer; up to two AddRaftVoter /
    RemoveRaftVoter reach whichever voter believes it leads. Every state holds, and the search
    reaches c2 added, c1 removed (it resigned after the commit) and c2 leading epoch 2."""
    config = QuorumModelConfig(voters=2, bootstrap_voters=1, max_changes=2, max_epoch=2,
                               max_records=0)
    model, result = check(config, time_limit_s=math.inf)
    assert result.holds and result.complete, result.violation
    views = [model.voter(v) for v in range(len(model._voters.values))]
    sets = {tuple(e.ids for e in v.stored.voter_sets) for v in views}
    assert ((1, 2), (2,)) in sets and ((1, 2), (1,)) in sets
    assert any(v.is_leader and v.epoch == 2 and v.stored.leader_id == 2
               and [e.ids for e in v.stored.voter_sets][-1] == (2,) for v in views)
    assert main(["sim", "check-quorum", "--voters", "2", "--bootstrap-voters", "3"]) == 2


@pytest.mark.slow  # 68,136 states, ~28 s at load 13; the default suite's simulator test
# (tests/sim/test_quorum_voter_changes.py) draws endpoint updates among its changes
def test_an_endpoint_update_holds_exhaustively_and_reaches_every_voter() -> None:
    """UpdateRaftVoter (KIP-853) among the changes: c1 and c2 the voters, one change (an
    add, a remove or an endpoint update) reaches whichever voter believes it leads. Every
    state holds, and the search reaches both voters holding a voter set record that names a
    new endpoint, with the same two voters."""
    config = QuorumModelConfig(voters=2, max_changes=1, max_epoch=2, max_records=0,
                               updates=True)
    model, result = check(config, time_limit_s=math.inf)
    assert result.holds and result.complete, result.violation
    views = [model.voter(v) for v in range(len(model._voters.values))]
    moved = {(v.stored.voter_sets[-1].ids, v.stored.voter_sets[-1].endpoints) for v in views
             if v.stored.voter_sets}
    assert ((1, 2), ((1, "c1'"),)) in moved and ((1, 2), ((2, "c2'"),)) in moved
