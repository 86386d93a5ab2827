"""The controller quorum in the simulated world: the same ``QuorumCore`` and ``QuorumDriver``
the controller process runs, over a real ``Log`` and ``quorum-state`` file on a
``MemoryFileSystem`` (a crash may lose every unsynced byte), the simulator's network (delay,
loss, partitions, paused nodes) and virtual time. Only sockets, clocks and disks are swapped.

``QuorumWorld`` also keeps the books the invariants need (defined once in
``floodmark.spec.quorum``, which the model checker shares):

* election safety: at most one leader per epoch, ever;
* leader completeness: a new leader's log holds every record committed before;
* no committed record lost or changed: one value per committed offset, and no voter cuts its
  log below its own high watermark;
* log matching: two voters with the same epoch at an offset hold the same records up to it;
* the leader's HW never decreases, and HW <= LEO on every voter.

The active controller writes: every ``write_interval_ms`` each voter that believes it leads
appends one record (a stale leader's writes must never commit).

With ``snapshot_interval`` set, every voter snapshots (KIP-630, the controller's own
``SnapshotStore`` and log-cutting rules) once that many records were committed after its last
snapshot, and cuts its log; a voter behind the leader's log start loads the leader's snapshot
by FetchSnapshot. A voter's records are then its newest snapshot's plus its log's, so every
invariant above still reads the whole history.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from floodmark.controller import (
    QuorumConfig,
    QuorumCore,
    QuorumDriver,
    QuorumMessage,
    QuorumStateFile,
    RoleChanged,
    SnapshotId,
    SnapshotStore,
    bootstrap_bindings,
    cut_log_before,
    decode_snapshot,
    directory_of,
    encode_snapshot,
    format_directory,
    in_force,
    load_or_format,
    open_with_snapshot,
    snapshot_epoch,
)
from floodmark.sim.network import Network, NetworkConfig, PartitionMode
from floodmark.sim.world import World
from floodmark.spec import (
    Entry,
    commit_conflict,
    decode_entries,
    describe_message,
    log_matching,
    missing_committed,
    node_name,
    other_leader,
    under_replicated,
)
from floodmark.spec import quorum as inv
from floodmark.storage import Log, LogConfig, MemoryFileSystem

QUORUM_DIR = "/controller"
LOG_DIR = f"{QUORUM_DIR}/__cluster_metadata-0"


@dataclass(frozen=True, slots=True)
class QuorumSimConfig:
    """Virtual milliseconds, scaled down from Kafka's defaults (1000/2000/1000/2000/20)."""

    voters: int = 3
    election_timeout_ms: int = 150
    fetch_timeout_ms: int = 300
    election_backoff_max_ms: int = 150
    request_timeout_ms: int = 100
    retry_backoff_ms: int = 10
    fetch_idle_backoff_ms: int = 20
    write_interval_ms: int = 40
    fetch_max_bytes: int = 1
    """Bytes per fetch answer (at least one batch): 1 moves records one batch per round trip,
    which reaches interleavings (a voter holding an old epoch's record but not the new
    leader's first one) that whole-log answers hide."""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    snapshot_interval: int = 0
    """Committed records between a voter's snapshots (0: no snapshots, the log is never cut)."""
    segment_bytes: int = 1 << 30
    format_voters: bool = True
    """Format every voter's data dir with every voter's directory id before the first start
    (``directory_id.format_directory``, as ``cluster up`` does); False: each makes its own at its
    first start and the leader binds them as it hears from them."""
    snapshot_chunk_bytes: int = 256
    """Bytes per FetchSnapshot answer: a transfer takes several round trips."""
    bootstrap_voters: int = 0
    """Nodes 1..this form the bootstrap voter set (0: all); the others start as observers,
    to be added with AddRaftVoter (KIP-853)."""
    """Small with snapshots, so cutting the log deletes whole segments for real."""

    def log_config(self) -> LogConfig:
        return LogConfig(segment_bytes=self.segment_bytes, retention_ms=-1)

    @property
    def bootstrap(self) -> tuple[int, ...]:
        return tuple(range(1, (self.bootstrap_voters or self.voters) + 1))

    def quorum_config(self, node_id: int) -> QuorumConfig:
        return QuorumConfig(node_id, self.bootstrap,
                            election_timeout_ms=self.election_timeout_ms,
                            fetch_timeout_ms=self.fetch_timeout_ms,
                            election_backoff_max_ms=self.election_backoff_max_ms,
                            request_timeout_ms=self.request_timeout_ms,
                            retry_backoff_ms=self.retry_backoff_ms,
                            fetch_idle_backoff_ms=self.fetch_idle_backoff_ms)


class SimVoter:
    """One controller process: its disk survives crashes (minus what was not synced)."""

    def __init__(self, world: QuorumWorld, node_id: int) -> None:
        self.world = world
        self.node_id = node_id
        self.name = node_name(node_id)
        self.fs = MemoryFileSystem()
        self.fs.mkdirs(QUORUM_DIR)
        self.fs.fsync_dir("/")
        self.alive = False
        self.paused = False
        self.incarnation = 0
        self.log: Log | None = None
        self.driver: QuorumDriver | None = None
        self.snapshots: SnapshotStore | None = None
        self._snapshot_entries: tuple[SnapshotId, dict[int, Entry]] | None = None
        self._newest_snapshot = 0
        """The end offset of the newest snapshot the store listed since this process started:
        while a process runs its snapshots are only added (written, installed) or pruned below
        the newest, so the newest one is never older than this."""
        self.snapshots_loaded = 0  # snapshots installed from the leader (FetchSnapshot)
        self.disks = 1  # data dirs so far (a wipe gives it a new one, with a new directory id)
        self.readmitted = True
        """False from a wipe until it learns its id is bound to its new directory: until then
        the quorum does not count it (absent), and what its lost disk held is gone."""
        self._wake_at: int | None = None
        self._tick_on_resume = False
        world.net.add_node(self.name, self.on_message)
        world.net.node_down(self.name)

    @property
    def core(self) -> QuorumCore | None:
        return self.driver.core if self.driver is not None else None

    def directory_name(self) -> str:
        """The directory id of this voter's current data dir (deterministic: no random draw)."""
        return f"{self.name}-dir{self.disks}"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        assert not self.alive
        now = self.world.now_ms
        self.log = Log.open(LOG_DIR, self.world.config.log_config(), fs=self.fs, now_ms=now)
        state_file = QuorumStateFile(self.fs, QUORUM_DIR)
        directory_id = load_or_format(self.fs, QUORUM_DIR, self.directory_name)
        core = QuorumCore(self.world.config.quorum_config(self.node_id), state_file.read(),
                          random.Random(self.world.rng.getrandbits(32)), directory_id)
        self._newest_snapshot = 0
        if self.world.config.snapshot_interval > 0:
            self.snapshots = SnapshotStore(self.fs, LOG_DIR, on_installed=self._installed)
            found = open_with_snapshot(self.snapshots, self.log, may_start_empty=True)
            if found is not None:
                core.snapshot_written(found[0].end_offset, found[0].epoch,
                                      self.snapshots.size(found[0]))
        self.driver = QuorumDriver(core, self.log, state_file, self,
                                   self.world.config.fetch_max_bytes, snapshots=self.snapshots,
                                   snapshot_chunk_bytes=self.world.config.snapshot_chunk_bytes)
        self.alive = True
        self.paused = False
        self.incarnation += 1
        self._wake_at = None
        self.world.net.node_up(self.name)
        self.world.record(f"{self.name} start epoch={core.election_state.epoch} "
                          f"LEO={self.log.log_end_offset}")
        self.driver.start(now)
        self._after()

    def crash(self, lose_unsynced: bool) -> None:
        if not self.alive:
            return
        self.world.net.node_down(self.name)
        self.fs.crash(lose_unsynced, rng=self.world.rng)
        self.alive = False
        self.paused = False
        self.incarnation += 1
        self.log = None
        self.driver = None
        self.snapshots = None
        self._snapshot_entries = None
        self._newest_snapshot = 0
        self.world.record(f"{self.name} crash lose_unsynced={lose_unsynced}")
        self.world.forget_leader(self.node_id)
        self.world.connections_closed(self.node_id)

    def wipe(self) -> None:
        """The data dir is gone (a new disk): metadata log, snapshots, ``quorum-state`` and
        the directory id. It comes back on a new directory id, an observer until the leader
        re-admits it (KIP-853, ``controller/quorum/voter_set.py``)."""
        self.crash(lose_unsynced=True)
        self.disks += 1
        self.readmitted = False
        self.fs = MemoryFileSystem()
        self.fs.mkdirs(QUORUM_DIR)
        self.fs.fsync_dir("/")
        self.world.record(f"{self.name} data dir wiped")

    def stop_gracefully(self) -> None:
        """SIGTERM: a leader resigns first (EndQuorumEpoch), then the process exits."""
        if self.driver is None or not self.alive:
            return
        self.driver.resign(self.world.now_ms)
        self._after()
        self.world.world.schedule(5, self._exit, self.incarnation)

    def _exit(self, incarnation: int) -> None:
        if incarnation == self.incarnation:
            self.crash(lose_unsynced=False)

    def pause(self) -> None:
        if self.alive and not self.paused:
            self.paused = True
            self.world.net.pause(self.name)
            self.world.record(f"{self.name} paused")

    def resume(self) -> None:
        if self.alive and self.paused:
            self.paused = False
            self.world.net.resume(self.name)
            self.world.record(f"{self.name} resumed")
            if self._tick_on_resume:
                self._tick_on_resume = False
                self._tick()

    def peer_closed(self, peer_id: int, incarnation: int) -> None:
        """This voter's connection to ``peer_id`` closed: the shell reports it (the core
        acts only if that peer is its leader). A stopped process reads it when it runs again;
        the simulator drops it then (the fetch timeout still covers that case)."""
        if incarnation != self.incarnation or not self.alive or self.paused:
            return
        if self.driver is None:
            return
        self.driver.leader_disconnected(peer_id, self.world.now_ms)
        self._after()

    # -- ports (QuorumPorts) --------------------------------------------------------------------
    def send(self, destination: int, message: QuorumMessage, records: bytes) -> None:
        self.world.net.send(self.name, node_name(destination), (self.node_id, message, records))

    def high_watermark_changed(self, old: int, new: int) -> None:
        self.world.on_high_watermark(self, old, new)

    def role_changed(self, change: RoleChanged) -> None:
        self.world.on_role_changed(self, change)

    # -- events ---------------------------------------------------------------------------------
    def on_message(self, _src: str, payload: Any) -> None:
        if not self.alive or self.driver is None:
            return
        src_id, message, records = payload
        self.world.on_deliver(self, src_id, message)
        self.driver.deliver(src_id, message, records, self.world.now_ms)
        self._after()

    def write(self, value: str) -> None:
        if self.driver is None or self.paused or not self.driver.core.is_leader:
            return
        first, _ = self.driver.append_as_leader([value.encode()], self.world.now_ms)
        self.world.record(f"{self.name} append {value}@{first} epoch={self.driver.core.epoch}")
        self._after()

    def change_voters(self, add: bool, voter_id: int) -> str:
        """An operator's AddRaftVoter / RemoveRaftVoter reaches this node: Kafka's error name."""
        if self.driver is None or self.paused:
            return "UNREACHABLE"
        change = self.driver.add_voter if add else self.driver.remove_voter
        error, message, offset = change(voter_id, "", self.world.now_ms)
        self.world.record(f"{self.name} {'add' if add else 'remove'}-voter c{voter_id}: "
                          f"{error.name}{' ' + message if message else ''}"
                          + (f" @{offset}" if offset >= 0 else ""))
        self._after()
        return error.name

    def update_voter(self, voter_id: int) -> str:
        """Voter ``voter_id``'s UpdateRaftVoter reaches this node: a new endpoint (the
        simulated network routes by id; the endpoint is the voter set's record of it), with
        the directory that voter is on now. Kafka's error name."""
        if self.driver is None or self.paused:
            return "UNREACHABLE"
        sender = self.world.voters.get(voter_id)
        directory = (sender.core.directory_id if sender is not None
                     and sender.core is not None else "")
        endpoint = f"c{voter_id}.sim:{self.world.now_ms}"
        error, message, offset = self.driver.update_voter(voter_id, directory, endpoint,
                                                          self.world.now_ms)
        self.world.record(f"{self.name} update-voter c{voter_id} {endpoint}: {error.name}"
                          f"{' ' + message if message else ''}"
                          + (f" @{offset}" if offset >= 0 else ""))
        self._after()
        return error.name

    def _after(self) -> None:
        core = self.core
        if not self.readmitted and core is not None and directory_of(
                core.directories, self.node_id) == core.directory_id:
            self.readmitted = True
            self.world.readmissions += 1
            self.world.record(f"{self.name} re-admitted on directory {core.directory_id}")
        self.world.check_voter(self)
        self._maybe_snapshot()
        self._reschedule()

    # -- snapshots (KIP-630) ------------------------------------------------------------------
    def _installed(self, snapshot_id: SnapshotId, records: list[dict[str, Any]]) -> None:
        self.snapshots_loaded += 1
        self.world.record(f"{self.name} loaded snapshot {snapshot_id.end_offset}-"
                          f"{snapshot_id.epoch} from the leader")

    def _maybe_snapshot(self) -> None:
        store, core, log = self.snapshots, self.core, self.log
        if store is None or core is None or log is None:
            return
        end = core.high_watermark
        interval = self.world.config.snapshot_interval
        if end - self._newest_snapshot < interval:
            return  # the newest snapshot is at least that new: no need to list the files
        ids = store.ids()
        newest = self._newest_snapshot = ids[-1].end_offset if ids else 0
        if end - newest < interval:
            return
        entries = self.entries()
        if any(o not in entries for o in range(end)):
            return  # (cannot happen: the records below the HW are on this voter)
        snapshot_id = SnapshotId(end, snapshot_epoch(log, end))
        records = [{"type": "entry", "offset": o, "epoch": entries[o][0], "value": entries[o][1]}
                   for o in range(end)]
        store.write(snapshot_id, encode_snapshot(snapshot_id, records))
        store.prune()
        cut_log_before(log, store.retained_start(), now_ms=self.world.now_ms)
        core.snapshot_written(end, snapshot_id.epoch, store.size(snapshot_id))
        self.world.record(f"{self.name} snapshot {end}-{snapshot_id.epoch}; log start "
                          f"{log.log_start_offset}")

    def _reschedule(self) -> None:
        if not self.alive or self.driver is None:
            return
        now = self.world.now_ms
        when = max(now, self.driver.core.next_deadline_ms())
        if self._wake_at is not None and now <= self._wake_at <= when:
            return  # an earlier wake-up is pending; it reschedules
        self._wake_at = when
        self.world.world.schedule(when - now, self._wake, self.incarnation, when)

    def _wake(self, incarnation: int, when: int) -> None:
        if incarnation != self.incarnation or when != self._wake_at or not self.alive:
            return
        self._wake_at = None
        if self.paused:  # a stopped process runs no timers
            self._tick_on_resume = True
            return
        self._tick()

    def _tick(self) -> None:
        if self.driver is None:
            return
        self.driver.tick(self.world.now_ms)
        self._after()

    # -- views ----------------------------------------------------------------------------------
    def entries(self) -> dict[int, Entry]:
        """Every record this voter holds: its newest snapshot's, then its log's."""
        if self.log is None:
            return {}
        return _entries(self.snapshots, self.log, self)

    def snapshot_entries(self, store: SnapshotStore) -> dict[int, Entry]:
        ids = store.ids()
        if not ids:
            return {}
        if self._snapshot_entries is None or self._snapshot_entries[0] != ids[-1]:
            self._snapshot_entries = (ids[-1], _decode_entries(store, ids[-1]))
        return dict(self._snapshot_entries[1])

    def snapshot(self) -> dict[str, Any]:
        core, log = self.core, self.log
        if core is None or log is None:
            return {"alive": False}
        return {"alive": True, "paused": self.paused, "role": core.role.__class__.__name__,
                "epoch": core.epoch, "leader": core.leader_id,
                "voted_for": core.election_state.voted_for, "leo": log.log_end_offset,
                "hw": core.high_watermark,
                "epochs": [[e.epoch, e.start_offset] for e in log.epoch_cache.entries()]}


@dataclass(slots=True)
class Violation:
    time_ms: int
    invariant: str
    detail: str


class QuorumWorld:
    def __init__(self, seed: int, config: QuorumSimConfig | None = None,
                 *, max_events: int = 2_000_000) -> None:
        self.config = config or QuorumSimConfig()
        self.world = World(seed, max_events=max_events)
        self.rng = self.world.rng
        self.net = Network(self.world, self.config.network)
        self.voters = {i: SimVoter(self, i) for i in range(1, self.config.voters + 1)}
        if self.config.format_voters:  # the quorum's first formation (cluster up's)
            bootstrap = bootstrap_bindings({v.node_id: v.directory_name()
                                            for v in self.voters.values()})
            for voter in self.voters.values():
                format_directory(voter.fs, QUORUM_DIR, voter.directory_name(), bootstrap)
        self.leaders_by_epoch: dict[int, int] = {}
        self.committed: dict[int, Entry] = {}  # offset -> the record committed there
        self.violations: list[Violation] = []
        self.elections = 0
        self.writes = 0
        self.truncations = 0
        self.readmissions = 0  # wiped voters bound again to their new directory
        self.observer: Callable[[str, SimVoter | None], None] | None = None
        self._leader_hw: dict[tuple[int, int], int] = {}  # (node, epoch) -> HW as leader
        self._writing = False

    # -- driving -------------------------------------------------------------------------------
    @property
    def now_ms(self) -> int:
        return self.world.now_ms

    def record(self, line: str) -> None:
        self.world.record(line)

    def start_all(self) -> None:
        for voter in self.voters.values():
            voter.start()

    def start_writes(self) -> None:
        if not self._writing:
            self._writing = True
            self.world.schedule(self.config.write_interval_ms, self._write_tick)

    def stop_writes(self) -> None:
        self._writing = False

    def _write_tick(self) -> None:
        if not self._writing:
            return
        for voter in self.voters.values():
            if voter.core is not None and voter.core.is_leader:
                self.writes += 1
                voter.write(f"w{self.writes}")
        self.world.schedule(self.config.write_interval_ms, self._write_tick)

    def run_for(self, duration_ms: int) -> None:
        self.world.run_until(self.now_ms + duration_ms)

    def partition(self, node_id: int, mode: PartitionMode) -> None:
        name = node_name(node_id)
        for other in self.voters:
            if other != node_id:
                self.net.cut(name, node_name(other), mode)
        self.record(f"{name} partitioned ({mode.value})")
        if mode is PartitionMode.RESET:  # both sides see their connections reset
            self.connections_closed(node_id)
            voter = self.voters[node_id]
            for other in self.voters:
                if other != node_id:
                    self.world.schedule(self.config.network.min_delay_ms, voter.peer_closed,
                                        other, voter.incarnation)

    def connections_closed(self, node_id: int) -> None:
        """Every connection to ``node_id`` closed (its process is gone, or a reset cut them):
        each other voter's shell notices one network delay later."""
        for other in self.voters.values():
            if other.node_id != node_id:
                self.world.schedule(self.config.network.min_delay_ms, other.peer_closed,
                                    node_id, other.incarnation)

    def heal(self) -> None:
        self.net.heal()
        self.record("network healed")

    def leaders(self) -> list[SimVoter]:
        return [v for v in self.voters.values() if v.core is not None and v.core.is_leader]

    def forget_leader(self, node_id: int) -> None:
        if self.observer is not None:
            self.observer(f"{node_name(node_id)} process gone", None)

    # -- bookkeeping and invariants ------------------------------------------------------------
    def violation(self, invariant: str, detail: str) -> None:
        self.violations.append(Violation(self.now_ms, invariant, detail))
        self.record(f"VIOLATION {invariant}: {detail}")

    def on_deliver(self, voter: SimVoter, src: int, message: QuorumMessage) -> None:
        if self.observer is not None:
            self.observer(f"{voter.name} <- {node_name(src)} {describe_message(message)}", voter)

    def on_role_changed(self, voter: SimVoter, change: RoleChanged) -> None:
        self.record(f"{voter.name} -> {change.role} epoch={change.epoch} leader={change.leader_id}")
        if change.role == "leader":
            self.elections += 1
            holder = other_leader(self.leaders_by_epoch, change.epoch, voter.node_id)
            self.leaders_by_epoch.setdefault(change.epoch, voter.node_id)
            if holder is not None:
                self.violation(inv.ELECTION_SAFETY,
                               f"epoch {change.epoch} has leaders c{holder} and {voter.name}")
            entries = voter.entries()
            missing = missing_committed(entries, self.committed)
            if missing is not None:
                offset, entry = missing
                self.violation(inv.LEADER_COMPLETENESS,
                               f"{voter.name} leads epoch {change.epoch} without committed "
                               f"{entry} at offset {offset} (has {entries.get(offset)})")
        if self.observer is not None:
            self.observer(f"{voter.name} becomes {change.role} (epoch {change.epoch})", voter)

    def on_high_watermark(self, voter: SimVoter, old: int, new: int) -> None:
        core, log = voter.core, voter.log
        assert core is not None and log is not None
        if inv.hw_cut(old, new):
            # Only a truncation moves an HW back, and it must never cut a committed record.
            self.truncations += 1
            self.violation(inv.COMMITTED_LOST,
                           f"{voter.name} cut its log to {new}, below its HW {old}")
            return
        if core.is_leader:
            key = (voter.node_id, core.epoch)
            if inv.hw_cut(self._leader_hw.get(key, 0), new):
                self.violation(inv.LEADER_HW_MONOTONIC, f"{voter.name} HW {new} < "
                                                      f"{self._leader_hw[key]}")
            self._leader_hw[key] = new
            entries = voter.entries()
            for offset in range(old, new):
                entry = entries.get(offset)
                if entry is None:
                    self.violation(inv.COMMITTED_LOST,
                                   f"{voter.name} committed offset {offset} it does not hold")
                    continue
                known = commit_conflict(self.committed, offset, entry)
                self.committed.setdefault(offset, entry)
                if known is not None:
                    self.violation(inv.COMMITTED_CHANGED,
                                   f"offset {offset} committed as {known}, now {entry} by "
                                   f"{voter.name}")
        if self.observer is not None:
            self.observer(f"{voter.name} HW {old} -> {new}", voter)

    def check_voter(self, voter: SimVoter) -> None:
        core, log = voter.core, voter.log
        if core is None or log is None:
            return
        if inv.hw_above_leo(core.high_watermark, log.log_end_offset):
            self.violation(inv.HW_LE_LEO, f"{voter.name} HW {core.high_watermark} > LEO "
                                        f"{log.log_end_offset}")

    def check_log_matching(self) -> None:
        """Same epoch at an offset on two voters -> the same records up to that offset."""
        logs = {v.node_id: v.entries() for v in self.voters.values() if v.log is not None}
        found = log_matching(logs)
        if found is not None:
            a, b, top, offset = found
            la, lb = logs[a], logs[b]
            self.violation(inv.LOG_MATCHING,
                           f"c{a} and c{b} agree on epoch at {top} but differ at "
                           f"{offset}: {la.get(offset)} vs {lb.get(offset)}")

    def voter_sets_in_force(self, entries: dict[int, dict[int, Entry]]
                            ) -> list[tuple[int, ...]]:
        """The voter sets in force on the nodes (from each one's ``quorum-state`` file and its
        log's end), the bootstrap set when there are no voter set records."""
        found: set[tuple[int, ...]] = set()
        for v in self.voters.values():
            history = QuorumStateFile(v.fs, QUORUM_DIR).read().voter_sets if v.fs.exists(
                f"{QUORUM_DIR}/quorum-state") else ()
            end = max(entries[v.node_id], default=-1) + 1
            found.add(in_force(history, end, self.config.bootstrap))
        return sorted(found)

    def check_committed_on_majority(self) -> None:
        """Every committed record is on enough voters' disks that any future leader has it.
        A voter that lost its disk and is not re-admitted yet is absent: it can neither vote
        nor count, so what its lost disk held is not needed (``under_replicated``). With a
        changing voter set (KIP-853): on a majority of some voter set in force on some node
        (``mc.quorum.invariants.committed_on_majority`` says why that is the bound)."""
        entries = {v.node_id: v.entries() if v.log is not None else _durable_entries(v)
                   for v in self.voters.values()}
        found = None
        for voter_set in self.voter_sets_in_force(entries):
            members = [self.voters[i] for i in voter_set]
            absent = sum(1 for v in members if not v.readmitted)
            found = under_replicated(self.committed, [entries[v.node_id] for v in members
                                                      if v.readmitted], len(members), absent)
            if found is None:
                return
        if found is not None:
            offset, entry, holders = found
            self.violation(inv.COMMITTED_LOST,
                           f"committed {entry} at offset {offset} is on {holders} voters"
                           + (f" ({absent} absent)" if absent else ""))


def _decode_entries(store: SnapshotStore, snapshot_id: SnapshotId) -> dict[int, Entry]:
    _, records = decode_snapshot(store.read(snapshot_id))
    return {int(r["offset"]): (int(r["epoch"]), str(r["value"])) for r in records}


def _entries(store: SnapshotStore | None, log: Log, voter: SimVoter | None = None
             ) -> dict[int, Entry]:
    out: dict[int, Entry] = {}
    if store is not None and store.ids():
        out = (voter.snapshot_entries(store) if voter is not None
               else _decode_entries(store, store.ids()[-1]))
    if log.log_end_offset > log.log_start_offset:
        out.update((o, (e, v)) for o, e, v in decode_entries(log.read_all())
                   if o >= log.log_start_offset)
    return out


def _durable_entries(voter: SimVoter) -> dict[int, Entry]:
    """What a crashed voter will find on its disk when it restarts (read from a copy, so the
    check's recovery changes nothing the voter's own restart will see)."""
    probe = copy.deepcopy(voter.fs)
    if not probe.exists(LOG_DIR):
        return {}
    log = Log.open(LOG_DIR, voter.world.config.log_config(), fs=probe, now_ms=0)
    try:
        store = None
        if voter.world.config.snapshot_interval > 0:
            store = SnapshotStore(probe, LOG_DIR)
            open_with_snapshot(store, log, may_start_empty=True)
        return _entries(store, log)
    finally:
        log.close()


