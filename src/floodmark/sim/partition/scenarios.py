"""The named scenarios of SPEC section 3, replayed step by step in every protocol mode.

Each scenario is a script over the real core and storage (``script.Script``) plus the outcome
history documents for each mode (``Expectation``). ``run_scenario`` returns a
``ScenarioResult`` whose ``as_expected`` says whether floodmark reproduced that outcome.

Outcome vocabulary: ``lost`` = acknowledged acks=all values (and values a consumer was served)
missing from the final leader's log; ``diverged`` = two replicas hold different records at one
offset at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from floodmark.constants import NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication import Truncation, TxnState
from floodmark.replication import log as txn_log
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.follower_reads import FollowerReadCheck
from floodmark.sim.partition.script import Script

HW = Truncation.HIGH_WATERMARK
EO = Truncation.EPOCH_OFFSET
LE = Truncation.LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class Expectation:
    lost: tuple[str, ...]
    diverged: bool
    story: str
    extra: tuple[tuple[str, Any], ...] = ()  # further facts the scenario asserts


@dataclass(slots=True)
class ScenarioResult:
    scenario: str
    truncation: Truncation
    acknowledged: list[str]
    acknowledged_acks1: list[str]
    lost: list[str]
    diverged: bool
    diverged_at: int | None
    final: dict[str, dict[str, Any]]
    final_leader: str | None
    steps: list[dict[str, Any]]
    expected: Expectation
    facts: dict[str, Any] = field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    title: str = ""  # what the main run is, when the scenario also has variants

    @property
    def as_expected(self) -> bool:
        if (
            sorted(self.lost) != sorted(self.expected.lost)
            or self.diverged != self.expected.diverged
        ):
            return False
        return all(self.facts.get(key) == value for key, value in self.expected.extra)

    @property
    def verdict(self) -> str:
        lost = f"lost {', '.join(self.lost)}" if self.lost else "nothing lost"
        div = (
            f"replicas DIVERGED at offset {self.diverged_at}"
            if self.diverged
            else "replica logs identical"
        )
        status = (
            "as history documents" if self.as_expected else "UNEXPECTED (does not match history)"
        )
        return f"VERDICT {self.scenario} [{self.truncation.value}]: {lost}; {div} — {status}: {self.expected.story}"

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "truncation": self.truncation.value,
            "acknowledged": self.acknowledged,
            "acknowledged_acks1": self.acknowledged_acks1,
            "lost": self.lost,
            "diverged": self.diverged,
            "diverged_at": self.diverged_at,
            "final_leader": self.final_leader,
            "final": self.final,
            "steps": self.steps,
            "facts": self.facts,
            "variants": self.variants,
            "expected": {
                "lost": list(self.expected.lost),
                "diverged": self.expected.diverged,
                "story": self.expected.story,
            },
            "as_expected": self.as_expected,
            "verdict": self.verdict,
        }


def _result(
    name: str, script: Script, expected: Expectation, facts: dict[str, Any] | None = None
) -> ScenarioResult:
    diverged, at = script.diverged()
    return ScenarioResult(
        scenario=name,
        truncation=script.truncation,
        acknowledged=script.acknowledged(),
        acknowledged_acks1=script.acknowledged_acks1(),
        lost=script.lost(),
        diverged=diverged,
        diverged_at=at,
        final=script.final(),
        final_leader=script.final_leader(),
        steps=[s.as_json() for s in script.steps],
        expected=expected,
        facts=facts or {},
    )


# -- hw-truncation-data-loss (seeds 000/001, KIP-101 scenario 1, trace T4) -----------------------
def hw_truncation_data_loss(mode: Truncation) -> ScenarioResult:
    s = Script(("B", "A"), mode)
    s.boot()
    s.produce("m1")
    s.fetch("A")
    s.fetch("A", note=": B records A's LEO 1 -> HW 1, m1 acknowledged")
    s.release("A")
    s.produce("m2")
    s.fetch("A", note=": carries the HW snapshot 1")
    s.fetch("A", note=": B's HW -> 2, m2 acknowledged; A would learn it only from this response")
    s.crash("A", lose_unsynced=False)
    s.restart("A")
    s.crash("B", lose_unsynced=False)
    s.fence("B", "controller notices B is gone and fences")
    s.produce("m3")
    s.restart("B")
    s.fetch_until_idle("B")
    s.release("B")
    if mode is HW:
        exp = Expectation(
            ("m2",),
            True,
            "pre-0.11 rule: A truncated to its stale HW 1 on restart, was elected, and acknowledged m2 is gone (B keeps m2 where A wrote m3)",
        )
    else:
        exp = Expectation(
            (),
            False,
            "A never truncates to its HW; the epoch lookup shows nothing to cut, m2 survives",
        )
    return _result("hw-truncation-data-loss", s, exp)


# -- power-outage-divergence (seed 002, KIP-101 scenario 2, trace T5) -----------------------------
def power_outage_divergence(mode: Truncation) -> ScenarioResult:
    s = Script(("A", "B"), mode)
    s.boot()
    s.produce("m1")
    s.replicate("B")
    s.flush("A")
    s.flush("B")
    s.produce("m2")
    s.replicate("B")
    s.flush("A")
    s.crash("A", lose_unsynced=True)
    s.crash("B", lose_unsynced=True)
    s.restart("B")
    s.fence("A", "controller fences the dead A; B (in the ISR) is elected")
    s.produce("m3")
    s.restart("A")
    s.fetch_until_idle("A")
    s.release("A")
    if mode is HW:
        exp = Expectation(
            ("m2",),
            True,
            "A keeps m2 at offset 1 (its HW is 2), B wrote m3 there: the replicas diverge at offset 1 forever",
        )
    else:
        exp = Expectation(
            ("m2",),
            False,
            "A asks where epoch 0 ends on B (offset 1) and truncates m2: logs identical; m2 is lost, which is allowed because both replicas failed",
        )
    return _result("power-outage-divergence", s, exp)


# -- fast-leader-failover (KIP-279 / KAFKA-6361, trace T6 single-record variant) -----------------
def fast_leader_failover(mode: Truncation) -> ScenarioResult:
    s = Script(("A", "B"), mode)
    s.boot()
    s.produce("a0")
    s.replicate("B")
    s.produce("a1", acks=1, note=" (B does not fetch it)")
    s.move_leadership("controller moves leadership to B before A truncates")
    s.produce("b1", acks=1)
    s.move_leadership("controller moves leadership back to A before B fetches")
    s.produce("a2", acks=1)
    s.fetch_until_idle("B")
    s.release("B")
    facts = {"diverging_answers": s.cluster.broker("B").diverging_answers}
    if mode is EO:
        exp = Expectation(
            (),
            True,
            "KIP-101 as shipped: A answers 'epoch 1 ends at 2' (start of its next epoch), B keeps b1 at offset 1 while A has a1: divergence",
        )
    elif mode is LE:
        exp = Expectation(
            (),
            False,
            "A answers (epoch 0, end 2); B's own epoch 0 ends at 1, so B cuts b1 and fetches a1, a2: identical logs",
        )
    else:
        exp = Expectation(
            (),
            False,
            "pre-0.11: each replica cuts to its HW on becoming follower, so A drops a1 and B drops b1 (both acks=1): identical logs, unacknowledged writes lost",
        )
    return _result("fast-leader-failover", s, exp, facts)


# -- multi-round-truncation (KIP-279 walk back, trace T7) -----------------------------------------
def multi_round_truncation(mode: Truncation) -> ScenarioResult:
    s = Script(("C", "B"), mode, unclean_leader_election_enable=True)
    s.boot()
    s.produce("x0", acks=1)
    s.produce("x1", acks=1)
    s.fetch("B", note=": B replicates offsets 0..1 only")
    s.produce("x2", acks=1)
    s.produce("x3", acks=1)
    s.cluster.broker("C").drop_parked("B")
    s.isolate("C")
    s.produce("y", acks=1, note=" at offset 2, epoch of B")
    s.isolate("B")
    s.rejoin("C")
    s.produce("z", acks=1, note=" at offset 4 (C elected uncleanly)")
    s.isolate("C")
    s.rejoin("B")
    s.produce("w", acks=1, note=" at offset 3 (B elected uncleanly)")
    s.rejoin("C")
    s.fetch_until_idle("C")
    s.release("C")
    facts = {"diverging_answers": s.cluster.broker("C").diverging_answers}
    if mode is LE:
        exp = Expectation(
            (),
            False,
            "two DivergingEpoch answers walk C back (to 4, then to 2), then C fetches y, w: identical logs",
            (("diverging_answers", 2),),
        )
    elif mode is EO:
        exp = Expectation(
            (),
            True,
            "an offset-only answer (end of epoch 3 = 3) keeps C's x2 at offset 2 where B has y: divergence",
        )
    else:
        exp = Expectation(
            (),
            True,
            "C keeps everything up to its HW and only cuts to B's shorter log: x2, x3 at offsets 2..3 against y, w",
        )
    return _result("multi-round-truncation", s, exp, facts)


# -- epoch-change-same-leader (KAFKA-7164, trace T8) ----------------------------------------------
def epoch_change_same_leader(mode: Truncation) -> ScenarioResult:
    s = Script(("r1", "r2", "r3"), mode)
    s.boot()
    s.produce("id0", acks=1)
    s.fetch("r3", note=": r3 replicates id0, r2 does not")
    s.cluster.broker("r1").drop_parked("r3")
    s.deafen("r3", "r3 stops hearing from the controller (it will miss epoch changes)")
    s.move_leadership("controller moves leadership to r2")
    s.fetch_until_idle("r1")
    s.release("r1")
    s.move_leadership("controller moves leadership back to r1")
    s.produce("id1", acks=1, note=" at offset 0 in r1's new epoch")
    s.undeafen("r3", "r3 hears from the controller again: same leader r1, newer epoch")
    s.fetch_until_idle("r3")
    s.release("r3")
    story = {
        LE: "r3 re-validates on the epoch bump although the leader is unchanged: DivergingEpoch(0, 0) cuts id0, then it fetches id1",
        EO: "r3 re-validates on the epoch bump: OffsetsForLeaderEpoch(0) is undefined on r1, so r3 falls back to its HW 0 and cuts id0",
        HW: "r3 cuts to its HW 0 on the epoch bump and fetches id1",
    }[mode]
    return _result(
        "epoch-change-same-leader",
        s,
        Expectation(
            (),
            False,
            story + " (KAFKA-7164 was skipping this re-validation; floodmark never skips it)",
        ),
    )


# -- three-replica-sync (seed 000 closing question) ------------------------------------------------
def three_replica_sync(mode: Truncation) -> ScenarioResult:
    s = Script(("L", "F1", "F2"), mode, min_insync_replicas=2)
    s.boot()
    s.produce("m1")
    s.produce("m2")
    rounds = 0
    for _ in range(6):
        rounds += 1
        for follower in ("F1", "F2"):
            s.fetch(follower)
        for follower in ("F1", "F2"):
            s.release(follower, note=" (replica.fetch.wait.max.ms elapsed)")
        s.record(f"end of fetch round {rounds}")
        snaps = [b.snapshot() for b in s.cluster.brokers]
        if len({(x["leo"], x["hw"]) for x in snaps}) == 1 and snaps[0]["hw"] == snaps[0]["leo"]:
            break
    facts = {"rounds_until_agreement": rounds}
    exp = Expectation(
        (),
        False,
        "round 1 copies m1, m2 (HW snapshot 0); round 2 reports LEO 2 so the leader's HW becomes 2, and the parked responses carry it: all three agree after 2 rounds",
        (("rounds_until_agreement", 2),),
    )
    return _result("three-replica-sync", s, exp, facts)


# -- unclean-election (seed 002 last section) -------------------------------------------------------
def _unclean_run(mode: Truncation, unclean: bool) -> Script:
    s = Script(("A", "B"), mode, unclean_leader_election_enable=unclean)
    s.boot()
    s.produce("m1")
    s.replicate("B")
    s.cluster.broker("A").drop_parked("B")
    s.record("B stops fetching (slow disk, GC, ...)")
    s.produce("m2", note=" (waits for B)")
    s.shrink_isr("A")
    s.produce("m3", note=" (ISR {A}, min.insync.replicas=1)")
    s.crash("A", lose_unsynced=False)
    s.fence("A", "controller fences the dead leader")
    s.produce("m4")
    if not unclean:
        s.restart("A")
        s.produce("m5")
        s.fetch_until_idle("B")
        s.release("B")
    return s


def unclean_election(mode: Truncation) -> ScenarioResult:
    clean = _unclean_run(mode, unclean=False)
    unclean = _unclean_run(mode, unclean=True)
    facts = {
        "clean_unavailable": any("no leader" in st.event for st in clean.steps),
        "clean_lost": clean.lost(),
        "unclean_elections": unclean.cluster.controller.unclean_elections,
    }
    exp = Expectation(
        ("m2", "m3"),
        False,
        "clean election: no leader until A returns, nothing lost; unclean election: B leads at once and the committed m2, m3 are lost (reported)",
        (("clean_unavailable", True), ("clean_lost", []), ("unclean_elections", 1)),
    )
    result = _result("unclean-election", unclean, exp, facts)
    result.title = "unclean.leader.election.enable=true:"
    clean_result = _result("unclean-election", clean, exp)
    result.variants = {
        "clean": {
            k: v
            for k, v in clean_result.as_json().items()
            if k in ("acknowledged", "lost", "diverged", "final", "steps")
        },
        "unclean": {
            "acknowledged": result.acknowledged,
            "lost": result.lost,
            "diverged": result.diverged,
        },
    }
    return result


# -- last-replica-standing (KIP-966, trace T14) -----------------------------------------------------
def _last_replica_run(mode: Truncation, elr: bool) -> Script:
    s = Script(
        ("b1", "b0", "b2"),
        mode,
        min_insync_replicas=2,
        remove_unclean_from_isr=True,
        eligible_leader_replicas=elr,
    )
    s.boot()
    s.produce("v0")
    s.produce("v1")
    for f in ("b0", "b2"):
        s.fetch_until_idle(f)
    for f in ("b0", "b2"):
        s.release(f)
    for b in ("b1", "b0", "b2"):
        s.flush(b)
    for f in ("b0", "b2"):
        s.cluster.broker("b1").drop_parked(f)
    s.isolate("b0")
    s.produce("v2")
    s.fetch("b2")
    s.flush("b2")
    s.produce("v3")
    s.produce("v4")
    s.fetch_until_idle("b2")
    s.release("b2")
    s.isolate("b1")
    s.crash("b2", lose_unsynced=True)
    s.fence("b2", "controller fences the dead b2")
    s.rejoin("b0")
    s.rejoin("b1")
    s.produce("v5", acks=1)
    s.restart("b2")
    for f in ("b1", "b0", "b2"):
        if s.cluster.leader() is not None and s.cluster.leader() is not s.cluster.broker(f):
            s.fetch_until_idle(f)
    return s


def last_replica_standing(mode: Truncation) -> ScenarioResult:
    without = _last_replica_run(mode, elr=False)
    with_elr = _last_replica_run(mode, elr=True)
    elr_result = _result("last-replica-standing", with_elr, Expectation((), False, ""))
    facts = {
        "elr_lost": elr_result.lost,
        "elr_diverged": elr_result.diverged,
        "elr_final_leader": elr_result.final_leader,
    }
    exp = Expectation(
        ("v3", "v4"),
        False,
        "without eligible leader replicas (Kafka before 4.1; floodmark's controllers run them "
        "unless eligible.leader.replicas.version=0) the ISR cannot become empty, so b2 — "
        "the last member, which lost the unflushed v3, v4 — is re-elected and b1 truncates them: "
        "acknowledged writes lost globally (two brokers fenced plus a power loss is outside SPEC "
        "§4's premise: reported, not a violation). With KIP-966 ELR enabled b1 is elected from the "
        "ELR instead, b2 re-registers as unclean and catches up: nothing lost",
        (("elr_lost", []), ("elr_diverged", False), ("elr_final_leader", "b1")),
    )
    result = _result("last-replica-standing", without, exp, facts)
    result.title = "eligible.leader.replicas.version=0 (no eligible leader replicas):"
    result.variants = {
        "eligible_leader_replicas": {
            k: v
            for k, v in elr_result.as_json().items()
            if k in ("acknowledged", "lost", "diverged", "final", "final_leader", "steps")
        },
    }
    return result


# -- transaction-visibility (issue 15: the last stable offset) ----------------------------------
def transaction_visibility(mode: Truncation) -> ScenarioResult:
    """Two transactions on A (leader) and B: a read_committed consumer reads below the LSO =
    min(HW, first offset of the oldest transaction still open or whose marker is not yet below
    the HW); an abort hides its records; B rebuilt the same open transactions from what it
    replicated, so after A dies B's LSO is A's and the commit happens on B."""
    s = Script(("A", "B"), mode)
    s.boot()
    s.produce("p0")
    s.replicate("B")
    s.produce_txn("t1", "tx-a", 0, note=" (opens p7's transaction at offset 1)")
    s.replicate("B")
    s.produce("p1", note=" (after the open transaction: not yet visible to read_committed)")
    s.replicate("B")
    reads = [s.consume(note=" (LSO 1: p7's transaction is open)")]
    s.produce_txn("t2", "tx-b", 0, note=" (opens p8's transaction at offset 3)")
    s.replicate("B")
    s.end_txn("tx-a", committed=False, note=" (parked until B has the marker)")
    reads.append(s.consume(note=" (the marker at 4 is not below the HW yet: LSO still 1)"))
    s.replicate("B")
    reads.append(s.consume(note=" (LSO 3: p8 is open; t1 is aborted and dropped)"))
    s.crash("A", lose_unsynced=False)
    s.fence("A", "controller fences the dead A; B is elected")
    b = s.cluster.broker("B")
    assert b.partition is not None
    lso_after_failover = b.partition.last_stable_offset
    reads.append(s.consume(note=" (the new leader B has the same LSO 3)"))
    s.end_txn("tx-b", committed=True)
    reads.append(s.consume())
    s.restart("A")
    s.fetch_until_idle("A")
    s.release("A")
    lsos = {}
    for broker in s.cluster.brokers:
        if broker.partition is not None:
            lsos[broker.name] = broker.partition.last_stable_offset
    facts = {"reads": reads, "lso_after_failover": lso_after_failover, "final_lsos": lsos,
             "violations": [v.invariant for v in s.cluster.checker.violations]}
    exp = Expectation(
        (),
        False,
        "read_committed sees p0 while p7's transaction is open, p0 p1 once the abort is "
        "replicated (t1 never), the same after A dies (B rebuilt the open transactions from "
        "what it replicated: LSO 3), and t2 only after its COMMIT; A rejoins with LSO 6 too",
        (("reads", [["p0"], ["p0"], ["p0", "p1"], ["p0", "p1"], ["p0", "p1", "t2"]]),
         ("lso_after_failover", 3), ("final_lsos", {"A": 6, "B": 6}), ("violations", [])),
    )
    return _result("transaction-visibility", s, exp, facts)


# -- coordinator-failover (issue 15: a committed transaction is all-or-nothing) -----------------
def coordinator_failover(mode: Truncation) -> ScenarioResult:
    """A transaction of two records is committed; the transaction coordinator (the broker's
    core) crashes right after PrepareCommit is in ``__transaction_state``, before any marker and
    before it answers. The decision is in the log: a new coordinator replays it, writes the
    COMMIT marker and CompleteCommit, and the client's retried EndTxn is answered NONE. A
    read_committed consumer sees neither record before the marker and both after it."""
    s = Script(("A", "B"), mode)
    s.boot()
    s.produce("p0")
    s.replicate("B")
    s.produce_txn("t1", "tx-a", 0, note=" (opens p7's transaction at offset 1)")
    s.produce_txn("t2", "tx-a", 1)
    s.replicate("B")
    s.crash_coordinator_after(TxnState.PREPARE_COMMIT)
    s.end_txn("tx-a", committed=True,
              note=" (the coordinator crashed after writing PrepareCommit: no marker)")
    reads = [s.consume(note=" (decided, not marked: LSO 1, neither t1 nor t2)")]
    s.restart_coordinator(note=" (PrepareCommit: it sends the COMMIT marker again)")
    s.replicate("B")
    reads.append(s.consume(note=" (the marker is below the HW: t1 and t2 together)"))
    retried = s.end_txn("tx-a", committed=True, note=" (the client's retry: done already)")
    coordinator = s.cluster.txn_coordinator()
    states = [txn_log.replay([batch]).transactions["tx-a"].state.kafka_name
              for batch in coordinator.log]
    leader = s.cluster.leader()
    assert leader is not None
    s.cluster.checker.check_committed_whole(leader)
    facts = {"reads": reads, "log_states": states,
             "retried_end_txn": None if retried is None else retried.name,
             "coordinator_epoch": coordinator.coordinator_epoch,
             "violations": [v.invariant for v in s.cluster.checker.violations]}
    exp = Expectation(
        (),
        False,
        "the coordinator crashed after PrepareCommit: nothing of the transaction is readable; "
        "the new coordinator (epoch 1) finished the commit from the log: t1 and t2 together",
        (("reads", [["p0"], ["p0", "t1", "t2"]]),
         ("log_states", ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]),
         ("retried_end_txn", "NONE"), ("coordinator_epoch", 1), ("violations", [])),
    )
    return _result("coordinator-failover", s, exp, facts)


# -- retry-below-min-isr (issue 13, finding 6: the chaos run's only duplicate) ---------------------
RETRY_PRODUCER_ID = 1000


def retry_below_min_isr(mode: Truncation) -> ScenarioResult:
    """An idempotent batch is in the new leader's log but not committed, and the new leader's ISR
    is below min.insync.replicas when the client's retry arrives. Kafka answers
    NOT_ENOUGH_REPLICAS ("not persisted"); librdkafka, told so, later resends the record under a
    bumped producer epoch, which no broker can recognise: the value is written twice. floodmark
    answers the retry as the original would be answered: it waits for the HW, then NONE with the
    original offset. The client's side is scripted as librdkafka behaves: when it bumps its epoch
    (on an OUT_OF_ORDER_SEQUENCE_NUMBER of a later request, "skipped sequence numbers"), every
    record it holds no acknowledgement for goes again from sequence 0."""
    s = Script(("L", "F1", "F2"), mode, min_insync_replicas=2, restart_keeps_isr=False)
    pid = RETRY_PRODUCER_ID
    s.boot()
    s.produce("v0", producer_id=pid, sequence=0)
    for f in ("F1", "F2"):
        s.fetch_until_idle(f)
    for f in ("F1", "F2"):
        s.release(f)
    s.produce("v1", producer_id=pid, sequence=1)
    s.fetch("F1", note=": F1 copies v1; L does not know yet, so v1 is not committed")
    s.crash("F2", lose_unsynced=False)
    s.fence("F2", "controller fences the dead F2")
    s.isolate("L")  # F1, the only ISR member left, leads with ISR {F1}
    s.produce("v1", producer_id=pid, sequence=1,
              note=" (the client's retry at F1: ISR {F1}, min.insync.replicas=2)")
    retry = s.cluster.producer.outcomes[s.produced["v1"]]
    s.restart("F2")
    s.fetch_until_idle("F2")
    s.release("F2")
    if retry.error is not ErrorCode.NONE:
        s.produce("v1", producer_id=pid, producer_epoch=1, sequence=0,
                  note=" (the client bumped its epoch: every unacknowledged record again)")
        s.fetch_until_idle("F2")
        s.release("F2")
    leader = s.cluster.leader()
    copies = sum(1 for _e, v in leader.entries if v == "v1") if leader else 0
    facts = {
        "retry_answer": retry.error.name if retry.error is not None else "pending",
        "retry_offset": retry.offset,
        "copies_of_v1": copies,
    }
    exp = Expectation(
        (),
        False,
        "the retry of v1 reaches F1 (ISR {F1}, below min.insync.replicas=2) and waits for the HW "
        "like the original instead of hearing NOT_ENOUGH_REPLICAS; when F2 is back in the ISR it "
        "is answered NONE at v1's original offset 1, and the client has nothing to resend under "
        "a new epoch: v1 is in the log once",
        (("retry_answer", "NONE"), ("retry_offset", 1), ("copies_of_v1", 1)),
    )
    return _result("retry-below-min-isr", s, exp, facts)


# -- follower-fetch-leader-moves (issue 26, KIP-392) -----------------------------------------
def _rack_read(s: Script, note: str = "", *, refresh: bool = True) -> list[str]:
    """The rack-aware consumer learns the metadata (unless ``refresh`` is False), sends one
    Fetch (to its preferred replica, else the leader) and takes the answer; returns the values
    it got."""
    consumer = s.cluster.consumer
    if refresh:
        s.cluster.net.send(consumer.name, "controller", m.MetadataRequest())
        s.cluster.settle()
    target = consumer.preferred if consumer.preferred != NO_LEADER else consumer.leader
    before = len(consumer.seen)
    position = consumer.position
    consumer.fetch_once(consumer.leader, consumer.leader_epoch)
    s.cluster.settle()
    got = [value for offset, (_e, value) in sorted(consumer.seen.items())][before:]
    answered = "no answer" if consumer.inflight else (got or "nothing")
    s.record(f"consumer (rack c) fetches at {position} from {s.cluster.name_of(target)}: "
             f"{answered}{note}")
    return got


def follower_fetch_leader_moves(mode: Truncation) -> ScenarioResult:
    """Brokers A, B, C in racks a, b, c with the rack-aware selector; a consumer in rack c.
    The leader A sends it to C, which serves up to its own HW (nothing above it, no error, while
    C lags the leader's HW). The leadership moves to B: C fences the consumer's old epoch, the
    consumer goes back to the new leader, which sends it to C again once it knows C holds the
    offset. C dies mid-read: the consumer times out, the leader keeps naming C until the
    controller fences it, then serves itself. C comes back without its unflushed tail: its log
    ends below the consumer's position, it answers OFFSET_OUT_OF_RANGE and the consumer returns
    to the leader without resetting. Every record a follower served was committed when served;
    the consumer's position never moved back; it read every acknowledged record once, in
    order."""
    s = Script(("A", "B", "C"), mode)
    s.cluster.racks = {1: "a", 2: "b", 3: "c"}
    check = s.cluster.follower_reads = FollowerReadCheck()
    consumer = s.cluster.consumer
    consumer.rack = "c"
    s.boot()
    for value in ("p0", "p1", "p2"):
        s.produce(value)
    s.replicate("B")
    s.replicate("C")
    reads = [_rack_read(s, " (the leader names C)"), _rack_read(s)]
    s.produce("p3")
    s.produce("p4")
    s.fetch("C")
    s.fetch("B")
    s.fetch("B")
    s.fetch("C", note=" (the leader's HW reaches 5; C's own is still 3)")
    reads.append(_rack_read(s, " (above C's HW: nothing, no error)"))
    s.release("C")
    reads.append(_rack_read(s, " (C's HW is 5 now)"))
    s.produce("p5")
    s.fetch("C", note=" (C has p5, B not yet: not committed)")
    reads.append(_rack_read(s, " (p5 is in C's log, above every HW: nothing)"))
    s.fetch("B")
    s.fetch("B")
    s.fetch("C")
    s.release("C")
    reads.append(_rack_read(s, " (p5 committed)"))
    s.move_leadership("controller moves leadership to B")
    reads.append(_rack_read(s, " (C is at epoch 1, the consumer still at 0: FENCED_LEADER_EPOCH,"
                               " back to the leader)", refresh=False))
    s.produce("p6")
    s.fetch_until_idle("C")
    s.release("C")
    s.fetch_until_idle("A")
    s.release("A")
    reads.append(_rack_read(s, " (the new leader B)"))
    reads.append(_rack_read(s))
    s.produce("p7")
    s.fetch_until_idle("A")
    s.crash("C", lose_unsynced=False)
    reads.append(_rack_read(s, " (C is dead)"))
    consumer.request_timed_out()
    reads.append(_rack_read(s, " (C is not fenced yet: B names it again)"))
    consumer.request_timed_out()
    s.fence("C", "the controller fences the dead C")
    reads.append(_rack_read(s, " (B serves itself)"))
    reads.append(_rack_read(s))
    s.restart("C")
    s.rejoin("C")
    s.fetch_until_idle("C")
    s.release("C")
    reads.append(_rack_read(s, " (B names C again)"))
    s.produce("p8")
    s.fetch_until_idle("A")
    s.fetch_until_idle("C")
    s.release("C")
    s.release("A")
    reads.append(_rack_read(s))
    s.crash("C", lose_unsynced=True)
    s.restart("C")
    reads.append(_rack_read(s, " (C lost its unflushed log: its end is below the position, "
                               "OFFSET_OUT_OF_RANGE, back to the leader, no reset)",
                            refresh=False))
    s.produce("p9")
    s.fetch_until_idle("A")
    s.release("A")
    reads.append(_rack_read(s, " (C restarted since its last fetch: B serves itself; p9 "
                               "waits for C, still in the ISR)"))
    s.fetch_until_idle("C")
    s.release("C")
    reads.append(_rack_read(s, " (caught up again: B names C)"))
    reads.append(_rack_read(s))
    consumer_values = [value for _o, (_e, value) in sorted(consumer.seen.items())]
    left = [line.rsplit("(", 1)[1].rstrip(")") for line in s.cluster.world.trace
            if "leaves replica" in line]
    facts = {
        "reads": reads,
        "back_to_leader": left,
        "consumer_read": consumer_values,
        "follower_records_served": check.records_served,
        "follower_violations": check.violations,
        "went_back": consumer.went_back,
        "violations": [v.invariant for v in s.cluster.checker.violations],
    }
    exp = Expectation(
        (), False,
        "a consumer in rack c reads p0..p9 once, in order, mostly from C; C never serves above "
        "its own HW, a fenced epoch and a dead C send the consumer back to the leader, and "
        "nothing a follower served was uncommitted",
        (("consumer_read", [f"p{i}" for i in range(10)]), ("follower_violations", []),
         ("went_back", []), ("violations", []),
         ("back_to_leader", ["FENCED_LEADER_EPOCH", "no answer", "no answer",
                             "OFFSET_OUT_OF_RANGE"])),
    )
    return _result("follower-fetch-leader-moves", s, exp, facts)


SCENARIOS: dict[str, tuple[Callable[[Truncation], ScenarioResult], str]] = {
    "hw-truncation-data-loss": (
        hw_truncation_data_loss,
        "KIP-101 #1: a restarted follower truncates to its stale HW and is elected (T4)",
    ),
    "power-outage-divergence": (
        power_outage_divergence,
        "KIP-101 #2: both replicas lose power; the unflushed one leads (T5)",
    ),
    "fast-leader-failover": (
        fast_leader_failover,
        "KIP-279: leadership A -> B -> A before anyone truncates (T6)",
    ),
    "multi-round-truncation": (
        multi_round_truncation,
        "KIP-279: a follower walks back over two diverging epochs (T7)",
    ),
    "epoch-change-same-leader": (
        epoch_change_same_leader,
        "KAFKA-7164: the leader is unchanged but its epoch moved on (T8)",
    ),
    "three-replica-sync": (
        three_replica_sync,
        "seed 000: HW/LEO of a leader and two followers, fetch round by round",
    ),
    "unclean-election": (
        unclean_election,
        "seed 002: clean (unavailable) versus unclean (data lost) election",
    ),
    "last-replica-standing": (
        last_replica_standing,
        "KIP-966: the last ISR member lost its unflushed tail, without and with ELR (T14)",
    ),
    "coordinator-failover": (
        coordinator_failover,
        "the transaction coordinator crashes after PrepareCommit; a new one completes the "
        "commit from its log: all of the transaction or none",
    ),
    "retry-below-min-isr": (
        retry_below_min_isr,
        "issue 13: a retry reaches a new leader whose ISR is below min ISR; it waits for the HW "
        "like the original (never NOT_ENOUGH_REPLICAS), so no epoch-bump duplicate",
    ),
    "transaction-visibility": (
        transaction_visibility,
        "KIP-98: read_committed stops at the last stable offset; an abort hides its records",
    ),
    "follower-fetch-leader-moves": (
        follower_fetch_leader_moves,
        "KIP-392: a consumer reads from a follower in its rack while the leadership moves and "
        "that follower dies; nothing uncommitted is served, its position never moves back",
    ),
}


def run_scenario(name: str, mode: Truncation) -> ScenarioResult:
    try:
        fn, _ = SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; try: {', '.join(SCENARIOS)}") from None
    return fn(mode)
