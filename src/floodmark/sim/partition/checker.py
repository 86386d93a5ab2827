"""SPEC section 4 invariants, checked by the simulator after every event.

Each property is defined once, in ``floodmark.spec.partition`` (the model checker judges its
states with the same functions); this module keeps the run's histories (leaders per epoch, the
acknowledged and served records, the transactions' decisions) and asks the spec.

=====================  ======================================================================
invariant               checked
=====================  ======================================================================
hw-le-leo              HW <= LEO on every live replica
leader-hw-monotonic    a leader's HW never decreases during one leadership (broker,
                       incarnation, epoch); across leader changes the partition HW may go back
                       (a new leader learns the HW one fetch late), as in Kafka
one-leader-per-epoch   no two brokers are leader in the same leader epoch
one-writer-per-epoch   no two brokers append a client's records as leader in the same leader
                       epoch (issue 26 §4: a leader that stepped down for clients must not
                       write, and nothing lets a deposed one write in the new epoch)
epoch-monotonic        the leader epoch a broker knows never decreases (across restarts too)
log-matching           below min(HW_a, HW_b) two live replicas hold identical records
acked-write-lost       every acknowledged acks=all write, and every record a consumer was
                       served, is present at its offset on each new leader and on the final
                       leader (reported, not flagged, when the schedule broke SPEC's premise)
consumer-below-hw      a consumer is never served an offset >= the leader's HW
lso-le-hw              the last stable offset is at most the HW on every live replica
read-committed         a read_committed consumer is served nothing at or above the leader's LSO,
                       no record of an aborted transaction and no record of a transaction
                       still open (no COMMIT decided by the coordinator when it was served);
                       and it is served every record of a committed transaction that the
                       leader holds in the offsets the read covered (no lost commit: an
                       aborted-transaction index entry reaching over a commit hides it)
txn-all-or-nothing     at the end, every record of a committed transaction on the final leader is
                       below its LSO (its COMMIT marker is written: none left behind an open
                       transaction), and every acknowledged one is held (acked-write-lost)
idempotent-duplicate   with the idempotent producer, no value is written twice (its retries
                       of one sequence are deduplicated by the broker)
no-divergence          at the end, no two replicas hold different records at one offset
converged-after-heal   (liveness) after every fault healed and the producer stopped: a leader,
                       the full replica set in the ISR, one LEO and HW == LEO on every replica
=====================  ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from floodmark.sim.partition.broker import SimBroker
from floodmark.sim.partition.clients import Producer
from floodmark.sim.partition.controller import SimController
from floodmark.sim.world import World
from floodmark.spec import is_marker_label
from floodmark.spec import partition as spec


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    detail: str
    time_ms: int


class CheckerHost(Protocol):
    """What the checker sees of its cluster (``cluster.Cluster``)."""

    world: World
    brokers: list[SimBroker]
    controller: SimController
    producer: Producer

    def name_of(self, broker_id: int) -> str: ...
    def leader(self) -> SimBroker | None: ...


class Checker:
    def __init__(self, cluster: CheckerHost) -> None:
        self.cluster = cluster
        self.violations: list[Violation] = []
        self.reported_losses: list[Violation] = []  # outside SPEC's premise: reported only
        self.leader_of_epoch: dict[int, str] = {}
        self.writer_of_epoch: dict[int, str] = {}
        self.max_epoch: dict[str, int] = {}
        self.tenure_hw: dict[tuple[str, int, int], int] = {}
        self.acked: dict[int, str] = {}  # offset -> value (acks=all, acknowledged)
        self.served: dict[int, str] = {}  # offset -> value (served to a consumer)
        # (offset, value) -> leader epoch in which the record was first committed (HW passed it)
        self.commit_epoch: dict[tuple[int, str], int] = {}
        self.premise_holds = True
        # Transactions as the coordinator decides them: value -> (producer id, n-th
        # transaction of that producer); (producer id, n) -> committed? once a marker was sent.
        self.txn_of_value: dict[str, tuple[int, int]] = {}
        self.open_txn: dict[int, int] = {}  # producer id -> n of its open transaction
        self.txn_count: dict[int, int] = {}
        self.decided: dict[tuple[int, int], bool] = {}
        self._seen: set[tuple[str, str]] = set()
        self.max_violations = 50
        # Log matching reads only the live replicas' logs and HWs: its last verdict, with the
        # (name, log version, HW) of each live replica it was given (most events change none).
        self._matched: tuple[tuple[str, int, int], ...] = ()
        self._mismatch: str | None = None

    def flag(self, invariant: str, detail: str) -> None:
        key = (invariant, detail)
        if key in self._seen or len(self.violations) >= self.max_violations:
            return
        self._seen.add(key)
        violation = Violation(invariant, detail, self.cluster.world.now_ms)
        self.cluster.world.record(f"VIOLATION {invariant}: {detail}")
        if invariant == "acked-write-lost" and not self.premise_holds:
            self.reported_losses.append(violation)
        else:
            self.violations.append(violation)

    # -- hooks ----------------------------------------------------------------------------------
    def on_acknowledged(self, offset: int, value: str) -> None:
        previous = spec.commit_conflict(self.acked, offset, value)
        if previous is not None:
            # One offset holds one record: the first acknowledged write there is gone.
            self.flag(
                "acked-write-lost",
                f"{previous} was acknowledged at offset {offset}, later {value} was acknowledged "
                "at the same offset",
            )
            return
        self.acked[offset] = value

    def on_leader_high_watermark(self, broker: SimBroker, old: int, new: int) -> None:
        """Remember the first leader epoch in which each record became committed."""
        p = broker.partition
        if p is None or not p.is_leader:
            return
        for offset in range(max(old, 0), min(new, len(broker.entries))):
            self.commit_epoch.setdefault((offset, broker.entries[offset][1]), p.leader_epoch)

    def on_transactional_send(self, value: str, producer_id: int) -> None:
        """A producer writes ``value`` inside its open transaction (opening one if needed)."""
        n = self.open_txn.get(producer_id)
        if n is None:
            n = self.open_txn[producer_id] = self.txn_count.get(producer_id, 0) + 1
            self.txn_count[producer_id] = n
        self.txn_of_value[value] = (producer_id, n)

    def on_transaction_decided(self, producer_id: int, committed: bool) -> None:
        """The coordinator decided the producer's open transaction (before any marker)."""
        n = self.open_txn.pop(producer_id, None)
        if n is not None:
            self.decided[(producer_id, n)] = committed

    def on_served(
        self, broker: SimBroker, records: tuple[tuple[int, int, str], ...], hw: int,
        last_stable_offset: int = -1, isolation_level: int = 0,
        read: tuple[int, int] | None = None,
    ) -> None:
        """``read``: the offsets [start, end) the read covered (what it skipped included)."""
        if isolation_level == 1 and read is not None:
            self._check_no_lost_commit(broker, records, read)
        for offset, _epoch, value in records:
            if offset >= hw:
                self.flag("consumer-below-hw", f"{broker.name} served offset {offset} >= HW {hw}")
            if isolation_level == 1:
                self._check_read_committed(broker, offset, value, last_stable_offset)
            previous = spec.commit_conflict(self.served, offset, value)
            if previous is not None:
                self.flag(
                    "no-divergence",
                    f"consumers were served {previous} and {value} at offset {offset}",
                )
            self.served.setdefault(offset, value)

    def _check_no_lost_commit(self, broker: SimBroker, records: tuple[tuple[int, int, str], ...],
                              read: tuple[int, int]) -> None:
        shown = {offset for offset, _epoch, _value in records}
        start, end = read
        for offset in range(max(start, 0), min(end, len(broker.entries))):
            value = broker.entries[offset][1]
            txn = self.txn_of_value.get(value)
            if txn is not None and self.decided.get(txn) and offset not in shown:
                self.flag("read-committed", f"{broker.name} hid {value} at offset {offset}, of "
                          f"a committed transaction of producer {txn[0]}, from a read_committed "
                          f"consumer reading [{start}, {end}) (a lost commit)")
                return

    def _check_read_committed(self, broker: SimBroker, offset: int, value: str,
                              last_stable_offset: int) -> None:
        if offset >= last_stable_offset:
            self.flag("read-committed", f"{broker.name} served offset {offset} >= LSO "
                      f"{last_stable_offset} to a read_committed consumer")
        txn = self.txn_of_value.get(value)
        if txn is None:
            return
        why = spec.uncommitted_shown(self.decided.get(txn))
        if why is not None:
            self.flag("read-committed", f"{broker.name} served {value} of an {why} transaction "
                      f"of producer {txn[0]} to a read_committed consumer")

    def on_leader_append(self, broker: SimBroker, epoch: int) -> None:
        writer = self.writer_of_epoch.setdefault(epoch, broker.name)
        if writer != broker.name:
            self.flag("one-writer-per-epoch",
                      f"{writer} and {broker.name} both appended records in epoch {epoch}")

    def on_become_leader(self, broker: SimBroker, epoch: int) -> None:
        holder = spec.other_leader(self.leader_of_epoch, epoch, broker.name)
        if holder is not None:
            self.flag("one-leader-per-epoch", spec.two_leaders(epoch, holder, broker.name))
        self.leader_of_epoch.setdefault(epoch, broker.name)
        # Leader completeness: a leader of epoch e holds every record committed in epochs < e.
        # (A stale broker applying old metadata late need not hold what later epochs committed.)
        self.check_complete(broker, f"new leader {broker.name} (epoch {epoch})", below_epoch=epoch)

    def check_complete(self, broker: SimBroker, who: str, below_epoch: int | None = None) -> None:
        view = broker.view()
        if view is None:
            return
        for source, values in (("acknowledged", self.acked), ("consumed", self.served)):
            for offset, value in values.items():
                if (
                    below_epoch is not None
                    and self.commit_epoch.get((offset, value), below_epoch) >= below_epoch
                ):
                    continue
                lacks = spec.lacks_record(view, offset, value, what=source, who=who)
                if lacks is not None:
                    self.flag("acked-write-lost", lacks)

    # -- after every event ----------------------------------------------------------------------
    def check_state(self) -> None:
        live: list[spec.ReplicaView] = []
        logs: list[tuple[str, int, int]] = []
        for broker in self.cluster.brokers:
            view = broker.view()
            if view is None:
                continue
            live.append(view)
            logs.append((view.name, broker.mirror.version, view.high_watermark))
            for invariant, found in (("hw-le-leo", spec.hw_above_leo(view)),
                                     ("lso-le-hw", spec.lso_above_hw(view))):
                if found is not None:
                    self.flag(invariant, found)
            epoch = view.leader_epoch
            if epoch >= 0:
                known = self.max_epoch.get(broker.name, -1)
                went_back = spec.epoch_decreased(broker.name, known, epoch)
                if went_back is not None:
                    self.flag("epoch-monotonic", went_back)
                else:
                    self.max_epoch[broker.name] = epoch
            if view.is_leader:
                # One leadership: (broker, incarnation, epoch).
                key = (broker.name, broker.incarnation, epoch)
                went_back = spec.leader_hw_decreased(broker.name, epoch,
                                                     self.tenure_hw.get(key, -1),
                                                     view.high_watermark)
                if went_back is not None:
                    self.flag("leader-hw-monotonic", went_back)
                self.tenure_hw[key] = view.high_watermark
        matched = tuple(logs)
        if matched != self._matched:
            self._matched, self._mismatch = matched, spec.log_matching(live)
        if self._mismatch is not None:
            self.flag("log-matching", self._mismatch)

    # -- at the end -----------------------------------------------------------------------------
    def final_check(self) -> None:
        views = [v for v in (b.view() for b in self.cluster.brokers) if v is not None]
        diverged = spec.divergence(views)
        if diverged is not None:
            self.flag("no-divergence", diverged)
        leader = self.cluster.leader()
        if leader is not None:
            self.check_complete(leader, f"final leader {leader.name}")
            self.check_committed_whole(leader)
            if self.cluster.producer.idempotent:
                self.check_no_duplicates(leader)
        self.check_converged()

    def check_committed_whole(self, broker: SimBroker) -> None:
        """A committed transaction is all-or-nothing: each of its records ``broker`` holds is
        readable by read_committed (below the LSO), none is left behind a missing marker."""
        p = broker.partition
        if p is None:
            return
        lso = p.last_stable_offset
        for offset, (_epoch, value) in enumerate(broker.entries):
            txn = self.txn_of_value.get(value)
            if txn is not None and self.decided.get(txn) and offset >= lso:
                self.flag("txn-all-or-nothing",
                          f"{broker.name} holds {value} of a committed transaction of producer "
                          f"{txn[0]} at offset {offset}, not readable (LSO {lso}): its COMMIT "
                          "marker is missing")
                return

    def check_no_duplicates(self, broker: SimBroker) -> None:
        view = broker.view()
        found = None if view is None else spec.duplicate_record(
            view, lambda record: isinstance(record, str) and is_marker_label(record))
        if found is not None:
            self.flag("idempotent-duplicate", found)

    def check_converged(self) -> None:
        cluster = self.cluster
        registration = cluster.controller.registration
        states = {
            b.name: (b.log.log_end_offset, b.partition.high_watermark)
            for b in cluster.brokers
            if b.alive and b.log is not None and b.partition is not None
        }
        problems: list[str] = []
        if cluster.leader() is None:
            problems.append("no leader")
        if len(states) != len(cluster.brokers):
            problems.append("a broker is down")
        if set(registration.isr) != set(registration.replicas):
            problems.append(f"ISR {[cluster.name_of(r) for r in registration.isr]}")
        if len({leo for leo, _hw in states.values()}) > 1 or any(
            hw != leo for leo, hw in states.values()
        ):
            problems.append(f"(LEO, HW) per replica {states}")
        if problems:
            self.flag("converged-after-heal", "not converged after healing: " + "; ".join(problems))
