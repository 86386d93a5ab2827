"""Step-by-step driving of a simulated cluster, for the named scenarios.

A ``Script`` runs a ``Cluster`` with its timers off (``SimConfig.autonomous=False``): nothing
happens unless a step asks for it, and every step delivers all messages it causes (1 ms network
delay, no loss) before the next one. Each step is recorded with a snapshot of every replica
(log as offset:epoch:value, LEO, HW, epoch cache, and the leader's remote LEOs), which is what the
scenario tables print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from floodmark.constants import ACKS_ALL, NO_LEADER
from floodmark.errors import ErrorCode
from floodmark.replication import EpochQuery, FollowerFetch, Truncation, TxnState
from floodmark.sim.network import NetworkConfig, PartitionMode
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.cluster import Cluster
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.txn_coordinator import SimTxnCoordinator
from floodmark.spec import marker_label

CONTROLLER = "controller"
CLIENT = "txn-client"  # the scenario's transactional producer, as the coordinator sees it
FIRST_SCRIPT_PRODUCER_ID = 7  # the scenarios' first transactional producer is p7
TXN_TIMEOUT_MS = 60_000


@dataclass(slots=True)
class Step:
    event: str
    leader: str
    leader_epoch: int
    replicas: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": self.replicas,
            "notes": list(self.notes),
        }


class Script:
    def __init__(
        self,
        names: tuple[str, ...],
        truncation: Truncation,
        *,
        min_insync_replicas: int = 1,
        unclean_leader_election_enable: bool = False,
        remove_unclean_from_isr: bool = False,
        eligible_leader_replicas: bool = False,
        restart_keeps_isr: bool = True,
    ) -> None:
        # The seed documents' stories predate KRaft: a restarted broker keeps its ISR membership.
        config = SimConfig(
            restart_keeps_isr=restart_keeps_isr,
            replicas=len(names),
            min_insync_replicas=min_insync_replicas,
            truncation=truncation,
            unclean_leader_election_enable=unclean_leader_election_enable,
            remove_unclean_from_isr=remove_unclean_from_isr,
            eligible_leader_replicas=eligible_leader_replicas,
            autonomous=False,
            checkpoint_hw_on_change=True,
            produce_timeout_ms=10**9,  # acks=all waits for the HW or a leadership change
            network=NetworkConfig(min_delay_ms=1, max_delay_ms=1),
        )
        self.truncation = truncation
        self.cluster = Cluster(config, seed=0, names=names)
        self.names = names
        self.steps: list[Step] = []
        self.produced: dict[str, int] = {}  # value -> produce id
        self.txn_producers: dict[str, tuple[int, int]] = {}  # transactional id -> (pid, epoch)
        self._trace_mark = 0

    # -- plumbing -------------------------------------------------------------------------------
    def _id(self, name: str) -> int:
        return self.cluster.broker(name).broker_id

    def _settle(self) -> None:
        self.cluster.settle()

    def record(self, event: str) -> Step:
        reg = self.cluster.controller.registration
        replicas: dict[str, dict[str, Any]] = {}
        for broker in self.cluster.brokers:
            snap = broker.snapshot()
            replicas[broker.name] = snap
        trace = self.cluster.world.trace
        notes = [
            line.split(" ", 1)[1].strip() if " " in line.strip() else line
            for line in trace[self._trace_mark :]
        ]
        self._trace_mark = len(trace)
        step = Step(event, self.cluster.name_of(reg.leader), reg.leader_epoch, replicas, notes)
        self.steps.append(step)
        return step

    # -- steps ----------------------------------------------------------------------------------
    def boot(self) -> None:
        for broker in self.cluster.brokers:
            broker.start()
            self._settle()
        self.record(f"start {', '.join(self.names)}; leader {self.names[0]}")

    def produce(self, value: str, acks: int = ACKS_ALL, *, note: str = "",
                producer_id: int = -1, producer_epoch: int = 0,
                sequence: int = -1) -> ErrorCode | None:
        """Send one record to the controller's leader (or note that there is none). With
        ``producer_id``: as that idempotent producer's batch (``producer_epoch``, ``sequence``);
        sending the same three again is a client's retry."""
        reg = self.cluster.controller.registration
        if reg.leader == NO_LEADER:
            self.record(f"produce {value}: no leader, partition unavailable{note}")
            return ErrorCode.LEADER_NOT_AVAILABLE
        produce_id = self.cluster.producer.send(value, acks, to=reg.leader,
                                                producer_id=producer_id,
                                                producer_epoch=producer_epoch, sequence=sequence)
        self.produced[value] = produce_id
        self._settle()
        outcome = self.cluster.producer.outcomes[produce_id]
        status = "pending" if outcome.error is None else outcome.error.name
        who = (f" (p{producer_id} epoch {producer_epoch} seq {sequence})"
               if producer_id >= 0 else "")
        self.record(f"produce {value}{who} acks={'all' if acks == ACKS_ALL else acks} -> "
                    f"{status}{note}")
        return outcome.error

    # -- transactions: the client asks the coordinator (the broker's core) ---------------------
    def _coordinator(self) -> SimTxnCoordinator:
        return self.cluster.txn_coordinator(FIRST_SCRIPT_PRODUCER_ID)

    def _ask(self, request: Any) -> m.TxnReply | None:
        """One request to the transaction coordinator, delivered; its answer (None: none came,
        the coordinator is down)."""
        answers: list[m.TxnReply] = []
        if CLIENT not in self.cluster.net.nodes:
            self.cluster.net.add_node(CLIENT, lambda _src, msg: answers.append(msg))
        self.cluster.net.nodes[CLIENT].handler = lambda _src, msg: answers.append(msg)
        self.cluster.net.send(CLIENT, self._coordinator().name, request)
        self._settle()
        return answers[-1] if answers else None

    def _must(self, request: Any) -> m.TxnReply:
        reply = self._ask(request)
        if reply is None or reply.error is not ErrorCode.NONE:
            raise RuntimeError(f"{type(request).__name__}({request.transactional_id!r}): "
                               f"{'no answer' if reply is None else reply.error.name}")
        return reply

    def producer_of(self, transactional_id: str) -> tuple[int, int]:
        """(producer id, epoch) of ``transactional_id``: InitProducerId on first use."""
        held = self.txn_producers.get(transactional_id)
        if held is None:
            reply = self._must(m.InitProducerId(0, transactional_id, TXN_TIMEOUT_MS))
            held = self.txn_producers[transactional_id] = (reply.producer_id,
                                                           reply.producer_epoch)
        return held

    def produce_txn(self, value: str, transactional_id: str, sequence: int, *,
                    note: str = "") -> int:
        """An acks=all record of ``transactional_id``'s transaction: AddPartitionsToTxn (which
        opens it if none is open), then the record. Returns the producer id."""
        producer_id, epoch = self.producer_of(transactional_id)
        self._must(m.AddPartitionsToTxn(0, transactional_id, producer_id, epoch))
        reg = self.cluster.controller.registration
        self.cluster.checker.on_transactional_send(value, producer_id)
        produce_id = self.cluster.producer.send(value, ACKS_ALL, to=reg.leader,
                                                producer_id=producer_id, sequence=sequence,
                                                transactional=True,
                                                transactional_id=transactional_id)
        self.produced[value] = produce_id
        self._settle()
        outcome = self.cluster.producer.outcomes[produce_id]
        status = "pending" if outcome.error is None else outcome.error.name
        self.record(f"produce {value} (transaction of p{producer_id}) -> {status}{note}")
        return producer_id

    def end_txn(self, transactional_id: str, committed: bool, *,
                note: str = "") -> ErrorCode | None:
        """EndTxn to the coordinator: it writes PrepareCommit/PrepareAbort, answers, and writes
        the marker (WriteTxnMarkers) to the leader, which answers once it is replicated.
        Returns the coordinator's answer (None: it did not answer)."""
        producer_id, epoch = self.producer_of(transactional_id)
        reply = self._ask(m.EndTxn(0, transactional_id, producer_id, epoch, committed))
        label = marker_label(producer_id, committed)
        if reply is None:
            self.record(f"EndTxn of p{producer_id} ({label}): no answer{note}")
            return None
        status = self._coordinator().marker_status.get(producer_id)
        marker = "pending" if status is None else status.name
        self.record(f"coordinator writes {label} -> {marker}{note}")
        return reply.error

    def crash_coordinator_after(self, state: TxnState) -> None:
        """Fault: the coordinator crashes right after its next ``state`` record is in its log."""
        self._coordinator().crash_after = state

    def restart_coordinator(self, *, note: str = "") -> None:
        """A new coordinator replays ``__transaction_state`` and finishes what was prepared."""
        self._coordinator().restart()
        self._settle()
        self.record(f"a new transaction coordinator loads the log{note}")

    def consume(self, *, read_committed: bool = True, note: str = "") -> list[str]:
        """A consumer reads the whole partition from offset 0 (one Fetch per answer until it
        reaches the bound); returns the values it was served."""
        consumer = self.cluster.consumer
        consumer.isolation_level = 1 if read_committed else 0
        consumer.position = 0
        consumer.seen = {}
        reg = self.cluster.controller.registration
        for _ in range(20):
            before = consumer.position
            consumer.fetch_once(reg.leader, reg.leader_epoch)
            self._settle()
            if consumer.position == before:
                break
        values = [value for _o, (_e, value) in sorted(consumer.seen.items())]
        level = "read_committed" if read_committed else "read_uncommitted"
        self.record(f"{level} consumer reads {values or 'nothing'}{note}")
        return values

    def fetch(self, name: str, *, note: str = "") -> None:
        """One follower fetch round trip (an empty fetch stays parked at the leader)."""
        broker = self.cluster.broker(name)
        request = (
            broker.partition.next_fetch(broker.log) if broker.partition and broker.log else None
        )
        if not broker.send_fetch():
            self.record(f"{name} cannot fetch{note}")
            return
        self._settle()
        desc = "fetch"
        if isinstance(request, FollowerFetch):
            desc = (
                f"Fetch(offset={request.fetch_offset}, last_fetched_epoch={request.last_fetched_epoch}, "
                f"epoch={request.current_leader_epoch})"
            )
        elif isinstance(request, EpochQuery):
            desc = f"OffsetsForLeaderEpoch(epoch={request.leader_epoch})"
        parked = " (parked at the leader)" if broker.fetch_inflight else ""
        self.record(f"{name} {desc}{parked}{note}")

    def replicate(self, name: str) -> None:
        """The follower takes the leader's new records and the HW they move: a fetch that
        returns them, a second one that reports the follower's LEO (so the leader's HW
        advances; it stays parked), and the parked one answered with that HW."""
        self.fetch(name)
        self.fetch(name)
        self.release(name)

    def fetch_until_idle(self, name: str, rounds: int = 6) -> None:
        """Fetch until the follower's request gets parked (caught up), at most ``rounds`` times."""
        for _ in range(rounds):
            self.fetch(name)
            if self.cluster.broker(name).fetch_inflight:
                return

    def release(self, follower: str, *, note: str = "") -> None:
        """The leader answers a parked fetch (replica.fetch.wait.max.ms elapsed), current HW."""
        leader = self.cluster.leader()
        if leader is None or not leader.release_parked(follower):
            return
        self._settle()
        self.record(f"parked fetch of {follower} answered{note}")

    def flush(self, name: str) -> None:
        self.cluster.broker(name).flush()
        self.record(f"{name} flushes its log to disk")

    def crash(self, name: str, *, lose_unsynced: bool) -> None:
        broker = self.cluster.broker(name)
        for other in self.cluster.brokers:
            other.drop_parked(name)
        broker.crash(lose_unsynced)
        self._settle()
        what = (
            "power loss: unflushed data lost"
            if lose_unsynced
            else "process killed, page cache kept"
        )
        self.record(f"{name} crashes ({what})")

    def restart(self, name: str) -> None:
        self.cluster.broker(name).start()
        self._settle()
        self.record(f"{name} restarts")

    def fence(self, name: str, why: str = "controller fences") -> None:
        self.cluster.controller.fence(self._id(name))
        self._settle()
        self.record(why if name in why else f"{why} {name}")

    def isolate(self, name: str) -> None:
        """Cut ``name`` from the controller (lost heartbeats) and let the controller fence it."""
        self.cluster.net.cut(name, CONTROLLER, PartitionMode.RESET)
        self.cluster.controller.fence(self._id(name))
        self._settle()
        self.record(f"{name} loses contact with the controller and is fenced")

    def deafen(self, name: str, event: str) -> None:
        """Cut ``name`` from the controller without fencing it: it misses metadata changes."""
        self.cluster.net.cut(name, CONTROLLER, PartitionMode.RESET)
        self.record(event)

    def undeafen(self, name: str, event: str) -> None:
        """Heal ``name``'s link to the controller; the controller re-sends its metadata."""
        self.cluster.net.heal(name, CONTROLLER)
        self.cluster.controller.broadcast()
        self._settle()
        self.record(event)

    def rejoin(self, name: str) -> None:
        self.cluster.net.heal(name, CONTROLLER)
        self.cluster.controller.unfence(self._id(name))
        self.cluster.controller.broadcast()
        self._settle()
        self.record(f"{name} reaches the controller again and is unfenced")

    def move_leadership(self, why: str = "controller moves leadership") -> None:
        self.cluster.controller.move_leadership()
        self._settle()
        self.record(why)

    def shrink_isr(self, leader_name: str) -> None:
        """Let replica.lag.time.max.ms pass and run the leader's ISR shrink check."""
        world = self.cluster.world
        world.now_ms += self.cluster.config.replica_lag_time_max_ms + 1
        broker = self.cluster.broker(leader_name)
        assert broker.partition is not None and broker.log is not None
        broker.apply(broker.partition.maybe_shrink_isr(broker.log, world.now_ms))
        self._settle()
        self.record(f"{leader_name} shrinks the ISR (followers lag > replica.lag.time.max.ms)")

    # -- results --------------------------------------------------------------------------------
    def acknowledged(self) -> list[str]:
        """acks=all values acknowledged, in the order they were sent (the transaction
        coordinator's markers included)."""
        outcomes = self.cluster.producer.acknowledged(ACKS_ALL)
        if self.cluster.has_txn_coordinator:
            outcomes += self._coordinator().acknowledged
        return [o.value for o in sorted(outcomes, key=lambda o: o.sent_ms)]

    def acknowledged_acks1(self) -> list[str]:
        return [o.value for o in self.cluster.producer.acknowledged(1)]

    def final(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for broker in self.cluster.brokers:
            snap = broker.snapshot()
            out[broker.name] = {k: snap[k] for k in ("log", "leo", "hw", "epochs", "alive")}
        return out

    def final_leader(self) -> str | None:
        leader = self.cluster.leader()
        return leader.name if leader else None

    def lost(self) -> list[str]:
        """Acknowledged (acks=all) values, or values a consumer was served, missing from the
        final leader's log (every such value when there is no leader)."""
        leader = self.cluster.leader()
        present = {v for _e, v in leader.entries} if leader else set()
        served = list(self.cluster.checker.served.values())
        wanted = self.acknowledged() + [v for v in served if v not in self.acknowledged()]
        return [v for v in wanted if v not in present]

    def diverged(self) -> tuple[bool, int | None]:
        """True (and the first offset) when two replicas hold different records at one offset."""
        logs = [b.entries for b in self.cluster.brokers if b.alive]
        longest = max((len(x) for x in logs), default=0)
        for offset in range(longest):
            if len({x[offset] for x in logs if offset < len(x)}) > 1:
                return True, offset
        return False, None
