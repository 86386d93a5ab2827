"""The explorer: random fault schedules against the simulated cluster, invariants after every event.

One seed expands, deterministically, into a schedule of faults injected while a producer
(acks=all, unique values) and a consumer run:

* ``kill`` — process crash (page cache survives), restart after 5–250 ms (a fast restart stays in
  the ISR; a slow one is fenced first);
* ``power-loss`` — crash losing every unflushed byte (only while the budget of
  min.insync.replicas − 1 such crashes per run lasts), restart later;
* ``pause`` — the process stops (GC, SIGSTOP) for 20–700 ms, then resumes, possibly as a zombie;
* ``partition`` — isolate one broker from the controller, from the other brokers, or from
  everyone, in ``hold`` or ``reset`` mode, for 20–700 ms;
* ``leader-move`` — a graceful leader change by the controller (not a failure), half of the
  time followed 2–30 ms later by another one (fast failover, KAFKA-6361);
* ``isolate`` — the leader is cut off from the controller and the other brokers for 500–3000 ms
  while clients still reach it (longer than the producer's request timeout, so the idempotent
  producer retries the same sequences against it; issue 8's partition);
* ``long-pause`` — a follower stops for 800–3000 ms (longer than a request timeout).

With ``--transactions`` a transactional writer (``clients.TxnWriter``: one-record transactions,
half aborted) runs beside the producer and asks the transaction coordinator for every step; the
coordinator is the broker's own core (``txn_coordinator.SimTxnCoordinator`` drives
``replication.transactions``: its log, its markers, its timeouts). The consumer reads
read_committed: no record of an aborted or undecided transaction may reach it, none of a
committed one may be hidden from it, and LSO <= HW on every replica after every event. A second
read_committed consumer (``rereader``) reads the partition again from offset 0 whenever it
learns of a new leader, so that whatever a restarted broker rebuilt (issue 28: its producer
state and ``.txnindex``, rebuilt from the log at start) is read back in full once it leads.
The schedule also has ``restart`` — a clean shutdown (log flushed and closed, checkpoints
written) and a start 5–250 ms later —, beside ``kill`` and ``power-loss``. During the fault
phase the coordinator now and then crashes right after writing a PrepareCommit, PrepareAbort
or Ongoing record (before it answers or sends a marker); a new one takes over from its log
5-300 ms later (``txn-all-or-nothing`` at the end).

Every broker reads its log in chunks of ``scan_chunk_bytes`` when it starts (recovery, the
producer-state and ``.txnindex`` rebuild: the storage's own code), drawn per seed between 61 and
400 bytes (``scan_chunk_bytes_for``; its own RNG, so the fault schedules are those of the same
seeds before): batches of 70-80 bytes straddle chunk boundaries at every alignment across seeds.

SPEC section 4's premise is respected by construction: at most one broker is faulty at a time
(RF − min.insync.replicas = 1 for RF 3), a broker counts as faulty until it is alive, connected,
unpaused and back in the controller's ISR, and fewer than min.insync.replicas brokers ever lose
unflushed data. Unclean election is off. Then everything heals, the producer stops, the replicas
converge and the final checks run (divergence, acknowledged writes on the final leader).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.constants import ACKS_ALL, ACKS_LEADER, ACKS_NONE
from floodmark.replication import Truncation, TxnState
from floodmark.sim.network import NetworkConfig, PartitionMode
from floodmark.sim.partition.broker import SimBroker
from floodmark.sim.partition.checker import Violation
from floodmark.sim.partition.clients import Consumer, TxnWriter
from floodmark.sim.partition.cluster import Cluster
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.follower_reads import enable_follower_fetching

CONTROLLER = "controller"
DEFAULT_FAULT_PHASE_MS = 4000
DEFAULT_TXN_GIVE_UP_AFTER_MS = 1500
DEFAULT_TRANSACTION_VERSION = 2
TRANSACTION_VERSIONS = (0, 1, 2)
CLIENTS = ("producer", "consumer")


@dataclass(frozen=True, slots=True)
class ExploreOptions:
    replicas: int = 3
    truncation: Truncation = Truncation.LEADER_EPOCH
    fault_phase_ms: int = 4000  # keep equal to DEFAULT_FAULT_PHASE_MS
    converge_ms: int = 1500
    loss_probability: float = 0.01
    unsafe_ack_duplicates_before_commit: bool = False  # UNSAFE: issue 8's bug, to show it is found
    transactions: bool = False
    """Also run a transactional writer (one-record transactions, half aborted) and make the
    consumer read_committed: the ``read-committed`` invariant is then checked on every read."""
    scan_chunk_bytes: int | None = None
    """The brokers' ``LogConfig.scan_chunk_bytes``; None: drawn per seed
    (``scan_chunk_bytes_for``)."""
    txn_give_up_after_ms: int = DEFAULT_TXN_GIVE_UP_AFTER_MS
    """The transactional writer purges a record unacknowledged this long and aborts, reusing
    its sequence in the next transaction, as librdkafka does (``TxnWriter``); 0: never."""
    transaction_version: int = DEFAULT_TRANSACTION_VERSION
    """The transactional writer's ``transaction.version`` (0, 1: EndTxn without an epoch bump;
    2: KIP-890 part 2, Kafka 4.x's default for a new cluster, and floodmark's)."""
    transaction_verification: bool = True
    """``transaction.partition.verification.enable`` on the brokers (KIP-890 part 1)."""
    kafka_aborted_batch_duplicates: bool = False
    """Kafka's duplicate rule across an ABORT marker (UNSAFE with such a writer: it loses
    committed records). Only to show the explorer catches it."""
    step_down_on_lapse: bool = True
    """``SimConfig.step_down_on_lapse``: False runs Kafka's stale leader (issue 26 §4)."""
    follower_fetching: bool = False
    """KIP-392: racks, the rack-aware selector, and a consumer in broker 2's rack, which reads
    from a follower whenever broker 2 follows (``follower_reads.enable_follower_fetching``)."""

    @property
    def min_insync_replicas(self) -> int:
        return 2 if self.replicas >= 3 else 1


SCAN_CHUNK_RANGE = (61, 400)
"""``scan_chunk_bytes`` drawn per seed: from the storage's minimum (a batch header) to a few
batches' worth."""


def scan_chunk_bytes_for(seed: int, options: ExploreOptions) -> int:
    """The brokers' scan chunk for ``seed``: ``options.scan_chunk_bytes``, else a draw from an
    RNG of the seed's own, apart from the world's (every seed keeps the schedule it had before
    the chunk size was a parameter; the chunk size changes only how a restart reads the log)."""
    if options.scan_chunk_bytes is not None:
        return options.scan_chunk_bytes
    return random.Random(f"scan-chunk-bytes/{seed}").randint(*SCAN_CHUNK_RANGE)


@dataclass(slots=True)
class SeedResult:
    seed: int
    truncation: Truncation
    violations: list[Violation]
    reported_losses: list[Violation]
    faults: list[str]
    trace_hash: str
    events: int
    acknowledged: int
    trace: list[str] = field(default_factory=list)
    restarts: int = 0
    """Broker starts after the first boot (each recovers its log and rebuilds its producer
    state and ``.txnindex`` through the storage)."""
    scan_chunk_bytes: int = 0


def reproduce_command(seed: int, options: ExploreOptions) -> str:
    command = (
        f"floodmark sim replay --seed {seed} --truncation {options.truncation.value} "
        f"--replicas {options.replicas}"
    )
    if options.fault_phase_ms != DEFAULT_FAULT_PHASE_MS:
        command += f" --fault-phase-ms {options.fault_phase_ms}"
    if options.unsafe_ack_duplicates_before_commit:
        command += " --unsafe-ack-duplicates-before-commit"
    if options.transactions:
        command += " --transactions"
        if options.transaction_version != DEFAULT_TRANSACTION_VERSION:
            command += f" --transaction-version {options.transaction_version}"
        if not options.transaction_verification:
            command += " --no-transaction-verification"
    if options.scan_chunk_bytes is not None:
        command += f" --scan-chunk-bytes {options.scan_chunk_bytes}"
    if options.txn_give_up_after_ms != DEFAULT_TXN_GIVE_UP_AFTER_MS:
        command += f" --txn-give-up-after-ms {options.txn_give_up_after_ms}"
    if options.kafka_aborted_batch_duplicates:
        command += " --kafka-aborted-batch-duplicates"
    if not options.step_down_on_lapse:
        command += " --no-step-down-on-lapse"
    if options.follower_fetching:
        command += " --follower-fetching"
    return command


class Nemesis:
    """Injects one fault at a time, reverts it, waits for full health, repeats."""

    def __init__(self, cluster: Cluster, options: ExploreOptions) -> None:
        self.cluster = cluster
        self.world = cluster.world
        self.rng = cluster.world.rng
        self.options = options
        self.lossy_budget = options.min_insync_replicas - 1
        self.active: str | None = None
        self.faults: list[str] = []
        self.stopped = False
        self.recovered_at: dict[str, int] = {}

    def log(self, text: str) -> None:
        self.faults.append(f"{self.world.now_ms}ms {text}")
        self.world.record(f"NEMESIS {text}")

    def healthy(self, broker: SimBroker) -> bool:
        controller = self.cluster.controller
        net = self.cluster.net
        if not broker.alive or broker.paused:
            return False
        if broker.broker_epoch != controller.broker_epochs.get(broker.broker_id):
            return False
        if (
            broker.broker_id in controller.fenced
            or broker.broker_id not in controller.registration.isr
        ):
            return False
        # Recovered only once the controller has heard from it since the fault ended (otherwise a
        # session timeout from the fault may still fence it: it would still count as failed).
        if controller.last_heartbeat_ms.get(broker.broker_id, -1) <= self.recovered_at.get(
            broker.name, -1
        ):
            return False
        return not any(broker.name in link for link in net.cuts)

    def all_healthy(self) -> bool:
        return (
            self.active is None
            and all(self.healthy(b) for b in self.cluster.brokers)
            and (self.cluster.controller.registration.leader >= 0)
        )

    def start(self) -> None:
        self.world.schedule(self._gap(), self.tick)

    def _gap(self) -> int:
        # Often right after the cluster healed (races a restart or a leader move), else later.
        if self.rng.random() < 0.4:
            return self.rng.randint(1, 40)
        return self.rng.randint(80, 600)

    def tick(self) -> None:
        if self.stopped:
            return
        if not self.all_healthy():
            self.world.schedule(10, self.tick)
            return
        self.inject()
        self.world.schedule(self._gap(), self.tick)

    def _target(self) -> SimBroker:
        leader = self.cluster.leader()
        if leader is not None and self.rng.random() < 0.5:
            return leader
        return self.rng.choice(self.cluster.brokers)

    def inject(self) -> None:
        kinds = ["kill", "kill", "pause", "partition", "partition", "leader-move", "isolate",
                 "long-pause"]
        if self.options.transactions:
            # Restarts are where the producer state and the .txnindex are rebuilt (issue 28).
            # Only here, so that the schedules of plain seeds stay what they were.
            kinds.append("restart")
        if self.lossy_budget > 0:
            kinds.append("power-loss")
        kind = self.rng.choice(kinds)
        target = self._target()
        if kind == "isolate":
            self._isolate_leader(target)
            return
        if kind == "long-pause":
            self._long_pause_follower(target)
            return
        if kind == "leader-move":
            if self.cluster.controller.move_leadership():
                self.log("leader-move")
                if self.rng.random() < 0.5:
                    # Fast failover (KAFKA-6361): move again before anyone has caught up.
                    self.world.schedule(self.rng.randint(2, 30), self._move_again)
            return
        quick = kind in ("kill", "restart")
        duration = self.rng.randint(5, 250) if quick else self.rng.randint(20, 700)
        self.active = f"{kind} {target.name}"
        if kind == "restart":
            self.log(f"restart {target.name} (clean shutdown) for {duration}ms")
            target.shutdown()
            self.world.schedule(duration, self._restart, target)
        elif kind in ("kill", "power-loss"):
            lose = kind == "power-loss"
            if lose:
                self.lossy_budget -= 1
            self.log(f"{kind} {target.name} for {duration}ms")
            target.crash(lose_unsynced=lose)
            self.world.schedule(duration, self._restart, target)
        elif kind == "pause":
            self.log(f"pause {target.name} for {duration}ms")
            target.pause()
            self.world.schedule(duration, self._resume, target)
        else:
            mode = self.rng.choice([PartitionMode.HOLD, PartitionMode.RESET])
            scope = self.rng.choice(["controller", "brokers", "everyone"])
            peers: list[str] = []
            if scope in ("controller", "everyone"):
                peers.append(CONTROLLER)
            if scope in ("brokers", "everyone"):
                peers.extend(b.name for b in self.cluster.brokers if b is not target)
            if scope == "everyone":
                peers.extend(CLIENTS)
            self.log(f"partition {target.name} from {scope} ({mode.value}) for {duration}ms")
            for peer in peers:
                self.cluster.net.cut(target.name, peer, mode)
            self.world.schedule(duration, self._heal, target, peers)

    def _isolate_leader(self, fallback: SimBroker) -> None:
        """The leader loses the controller and its followers; producers and consumers still
        reach it (the partition of issue 8, where a retried duplicate was acknowledged)."""
        target = self.cluster.leader() or fallback
        duration = self.rng.randint(500, 3000)
        mode = self.rng.choice([PartitionMode.HOLD, PartitionMode.RESET])
        peers = [CONTROLLER, *(b.name for b in self.cluster.brokers if b is not target)]
        self.active = f"isolate {target.name}"
        self.log(
            f"isolate {target.name} from the controller and the brokers, clients still reach it "
            f"({mode.value}) for {duration}ms"
        )
        for peer in peers:
            self.cluster.net.cut(target.name, peer, mode)
        self.world.schedule(duration, self._heal, target, peers)

    def _long_pause_follower(self, fallback: SimBroker) -> None:
        leader = self.cluster.leader()
        followers = [b for b in self.cluster.brokers if b is not leader]
        target = self.rng.choice(followers) if followers else fallback
        duration = self.rng.randint(800, 3000)
        self.active = f"long-pause {target.name}"
        self.log(f"long pause of follower {target.name} for {duration}ms")
        target.pause()
        self.world.schedule(duration, self._resume, target)

    def _move_again(self) -> None:
        if not self.stopped and self.cluster.controller.move_leadership():
            self.log("leader-move (again)")

    def _restart(self, broker: SimBroker) -> None:
        if not broker.alive:
            broker.start()
        self.recovered_at[broker.name] = self.world.now_ms
        self.active = None
        self.cluster.checker.check_state()

    def _resume(self, broker: SimBroker) -> None:
        broker.resume()
        self.recovered_at[broker.name] = self.world.now_ms
        self.active = None

    def _heal(self, broker: SimBroker, peers: list[str]) -> None:
        for peer in peers:
            self.cluster.net.heal(broker.name, peer)
        self.recovered_at[broker.name] = self.world.now_ms
        self.active = None


def build_cluster(seed: int, options: ExploreOptions) -> Cluster:
    config = SimConfig(
        scan_chunk_bytes=scan_chunk_bytes_for(seed, options),
        replicas=options.replicas,
        min_insync_replicas=options.min_insync_replicas,
        truncation=options.truncation,
        network=NetworkConfig(
            min_delay_ms=1, max_delay_ms=4, loss_probability=options.loss_probability
        ),
        unsafe_ack_duplicates_before_commit=options.unsafe_ack_duplicates_before_commit,
        kafka_aborted_batch_duplicates=options.kafka_aborted_batch_duplicates,
        transaction_version=options.transaction_version,
        transaction_verification=options.transaction_verification,
        step_down_on_lapse=options.step_down_on_lapse,
        # The historical truncation modes run with the controller rule of their time (ZooKeeper:
        # a broker restarted within its session kept its ISR membership); leader-epoch mode runs
        # floodmark's (KRaft's) rule: a new incarnation leaves every ISR.
        restart_keeps_isr=options.truncation is not Truncation.LEADER_EPOCH,
    )
    cluster = Cluster(config, seed=seed)
    if options.follower_fetching:
        enable_follower_fetching(cluster)
    return cluster


CRASH_AFTER = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
               TxnState.ONGOING)


def _coordinator_crashes(cluster: Cluster, options: ExploreOptions) -> None:
    """With transactions, during the fault phase: now and then the transaction coordinator
    crashes right after its next record of some state is in its log (before it answers or sends
    a marker), and a new coordinator takes over from the log 5-300 ms later."""
    world = cluster.world
    coordinator = cluster.txn_coordinator()
    coordinator.restart_after_ms = (5, 300)

    def arm() -> None:
        if world.now_ms >= options.fault_phase_ms:
            coordinator.crash_after = None
            return
        if coordinator.alive and coordinator.crash_after is None:
            coordinator.crash_after = world.rng.choice(CRASH_AFTER)
            world.record(f"NEMESIS txn-coordinator crashes after its next "
                         f"{coordinator.crash_after.kafka_name}")
        world.schedule(world.rng.randint(300, 1200), arm)

    world.schedule(world.rng.randint(100, 600), arm)


def run_seed(seed: int, options: ExploreOptions, *, keep_trace: bool = False) -> SeedResult:
    cluster = build_cluster(seed, options)
    world = cluster.world
    world.trace_enabled = keep_trace
    cluster.boot()
    boots = sum(b.incarnation for b in cluster.brokers)
    nemesis = Nemesis(cluster, options)
    try:
        _run(cluster, nemesis, options)
    except Exception as exc:  # whatever the code under test raises is a finding
        # E.g. the storage refusing a log it cannot read at a restart: the seed must still be
        # reported (with its replay command), not end the exploration with a traceback.
        cluster.checker.flag("exception", f"{type(exc).__name__}: {exc}")
    return SeedResult(
        seed=seed,
        truncation=options.truncation,
        violations=list(cluster.checker.violations),
        reported_losses=list(cluster.checker.reported_losses),
        faults=nemesis.faults,
        trace_hash=world.trace_hash,
        events=world.events_run,
        acknowledged=len(cluster.checker.acked),
        trace=list(world.trace),
        restarts=sum(b.incarnation for b in cluster.brokers) - boots,
        scan_chunk_bytes=cluster.config.scan_chunk_bytes,
    )


SETTLE_STEP_MS = 10


def _finish_open_transaction(cluster: Cluster, writer: TxnWriter, limit_ms: int) -> None:
    """A stopped writer starts no transaction, but the one it has open still runs (its retries,
    EndTxn, the coordinator's markers): wait, at most ``limit_ms``, until it has ended and every
    marker is written, so that the convergence wait after it starts from a quiet partition
    (else a marker written just before the end is a false ``converged-after-heal`` or
    ``txn-all-or-nothing``)."""
    world = cluster.world
    coordinator = cluster.txn_coordinator()
    deadline_ms = world.now_ms + limit_ms
    while ((writer.phase != "idle" or coordinator.markers_in_flight)
           and world.now_ms < deadline_ms):
        world.run_until(min(world.now_ms + SETTLE_STEP_MS, deadline_ms))


def _run(cluster: Cluster, nemesis: Nemesis, options: ExploreOptions) -> None:
    world = cluster.world
    # Mostly acks=all (what the loss invariant is about); some seeds use acks=1 or acks=0, where
    # only what consumers were served must survive.
    cluster.producer.acks = world.rng.choice([ACKS_ALL] * 6 + [ACKS_LEADER, ACKS_NONE])
    cluster.producer.start()
    writer: TxnWriter | None = None
    rereader: Consumer | None = None
    if options.transactions:
        writer = TxnWriter(cluster, give_up_after_ms=options.txn_give_up_after_ms)
        cluster.consumer.isolation_level = 1
        writer.start()
        _coordinator_crashes(cluster, options)
        rereader = Consumer(cluster, name="rereader", isolation_level=1,
                            rewind_on_new_leader=True)
    cluster.consumer.start()
    if rereader is not None:
        rereader.start()
    nemesis.start()
    world.run_until(options.fault_phase_ms)
    nemesis.stopped = True
    world.record("NEMESIS stop: healing everything")
    cluster.net.heal()
    for broker in cluster.brokers:
        if not broker.alive:
            broker.start()
        elif broker.paused:
            broker.resume()
    if rereader is not None:
        rereader.rewind("everything healed")
    world.run_until(world.now_ms + options.converge_ms // 3)
    cluster.producer.stop()
    if writer is not None:
        writer.stop()
        _finish_open_transaction(cluster, writer, options.converge_ms)
    world.run_until(world.now_ms + options.converge_ms)
    cluster.consumer.stop()
    if rereader is not None:
        rereader.stop()
    cluster.checker.final_check()


@dataclass(slots=True)
class ExploreReport:
    options: ExploreOptions
    seeds: Sequence[int]
    results: list[SeedResult]
    elapsed_s: float
    totals: tuple[int, int, int] | None = None
    """(acknowledged writes, events, broker restarts) over every seed, when ``results`` holds
    only the seeds that found something (``sim/partition/distributed.py``); None: ``results`` holds every
    seed."""

    @property
    def acknowledged_writes(self) -> int:
        if self.totals is not None:
            return self.totals[0]
        return sum(r.acknowledged for r in self.results)

    @property
    def events(self) -> int:
        if self.totals is not None:
            return self.totals[1]
        return sum(r.events for r in self.results)

    @property
    def restarts(self) -> int:
        if self.totals is not None:
            return self.totals[2]
        return sum(r.restarts for r in self.results)

    @property
    def violations(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for result in self.results:
            for v in result.violations:
                out.append(
                    {
                        "seed": result.seed,
                        "invariant": v.invariant,
                        "detail": v.detail,
                        "time_ms": v.time_ms,
                        "reproduce": reproduce_command(result.seed, self.options),
                    }
                )
        return out

    @property
    def seeds_per_second(self) -> float:
        return len(self.seeds) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        failing = sorted({r.seed for r in self.results if r.violations})
        return {
            "seeds": len(self.seeds),
            "truncation": self.options.truncation.value,
            "replicas": self.options.replicas,
            "min_insync_replicas": self.options.min_insync_replicas,
            "violations": self.violations,
            "failing_seeds": failing,
            "reported_losses": [
                {"seed": r.seed, "invariant": v.invariant, "detail": v.detail}
                for r in self.results
                for v in r.reported_losses
            ],
            "acknowledged_writes": self.acknowledged_writes,
            "events": self.events,
            "restarts": self.restarts,
            "elapsed_s": round(self.elapsed_s, 3),
            "seeds_per_second": round(self.seeds_per_second, 2),
        }


def explore(
    seeds: int,
    options: ExploreOptions,
    *,
    start_seed: int = 1,
    progress: Callable[[SeedResult], None] | None = None,
) -> ExploreReport:
    started = time.perf_counter()  # wall time only for the seeds/s figure, never inside the sim
    results: list[SeedResult] = []
    seed_list = list(range(start_seed, start_seed + seeds))
    for seed in seed_list:
        result = run_seed(seed, options)
        results.append(result)
        if progress is not None:
            progress(result)
    return ExploreReport(options, seed_list, results, time.perf_counter() - started)
