"""``floodmark chaos run``: a real cluster in network namespaces, a workload, a fault schedule,
then the history checker.

One run: a lab (one namespace per controller, broker and the clients, on a bridge of its own) →
the controller and brokers (``LabCluster``) → topics → producers and consumers, each a process of
its own in the clients' namespace (``floodmark.chaos.workload``) → the seeded fault schedule
(``schedule.plan``, carried out by ``nemesis.Nemesis``) → heal everything and wait until every
partition has its whole replica set in the ISR again → a quiet period → stop the clients → a
final read of every partition → stop the cluster and read every replica's files → merge the
histories and check them (``checker.check``). Every process and namespace is removed on every
way out (an exception, SIGINT, SIGTERM).

``workload="txn"`` runs Jepsen's queue with transactions instead: transactional producers
(``producer-txn``) and a read_committed consumer by assignment; the final read is done twice,
read_uncommitted then read_committed (``--sparse``: markers take offsets), and
``checker.check_txn`` judges the history. Before it (``final_restart``, on by default for this
workload) the same two reads are done, then every broker is restarted in turn, so the final
reads see what the brokers rebuilt from their files.

``workload="group"`` runs Jepsen's queue through one consumer group: the plain producers and
``group_members`` confluent-kafka members of group ``chaos-group`` (``group_member``), polling
and committing after processing; the ``group`` faults end members and start new ones
(``_GroupMembers``), the ``group-coordinator`` faults hit the broker FindCoordinator names for
the group. After the final read, the group's committed offsets are read (``group-offsets``) and
``group_checker.check_group`` judges the history. ``group_protocol="mixed"`` starts members of
both protocols and, on a seeded schedule of its own beside the faults (``protocol_switch``,
``_ProtocolSwitches``), ends one member at a time and starts one speaking the other protocol,
so the group converts classic -> consumer and back (KIP-848's online migration); the brokers'
logs say how often (``group.conversions``).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from floodmark.chaos.availability import longest_ack_gap
from floodmark.chaos.checker import (
    FINAL_COMMITTED_PROCESS,
    FINAL_PROCESS,
    LIVE_COMMITTED_PROCESS,
    LIVE_PROCESS,
    check,
    check_txn,
)
from floodmark.chaos.duplicates import client_resent_only, explain_replicas
from floodmark.chaos.group_checker import GROUP_FINAL_PROCESS, check_group
from floodmark.chaos.history import merge, merged, read_events, value_id
from floodmark.chaos.nemesis import OFFSETS_KEY, TXN_STATE_KEY, Nemesis, Observer
from floodmark.chaos.netns import Lab, namespace_executor, run_in
from floodmark.chaos.nodes import (
    CONTROLLER_ID,
    LabCluster,
    controller_ids,
    host_of,
    read_conversions,
    read_partition_data,
    read_stored_commits,
)
from floodmark.chaos.protocol_switch import FENCED_AFTER_S, initial, other, retire, switch_plan
from floodmark.chaos.schedule import (
    DEFAULT_FAULTS,
    GROUP_DEFAULT_FAULTS,
    GROUP_ONLY,
    POWER_CUTS,
    TXN_DEFAULT_FAULTS,
    expand,
    plan,
)
from floodmark.chaos.share_checker import SHARE_FINAL_PROCESS, check_share
from floodmark.client import ClusterClient
from floodmark.cluster import MODES
from floodmark.metadata import OFFSETS_TOPIC
from floodmark.replication import DEFAULT_TRUNCATION, Truncation

CLIENTS_HOST = "clients"
WORKLOADS = ("plain", "txn", "group", "share")
GROUP = "chaos-group"   # the consumer-group workload's group
# "mixed": members of both, switching protocol on a schedule (KIP-848's online migration)
GROUP_PROTOCOLS = ("classic", "consumer", "mixed")
CONSUMER_SESSION_MS = 6000   # group.consumer.session.timeout.ms with --group-protocol consumer
CONSUMER_HEARTBEAT_MS = 500  # group.consumer.heartbeat.interval.ms
SHARE_GROUP = "chaos-share"  # the share-group workload's group (KIP-932)
SHARE_DELIVERY_COUNT_LIMIT = 5  # group.share.delivery.count.limit (Kafka's default)
SHARE_LOCK_MS = 10_000  # group.share.record.lock.duration.ms: a dead member's records return
SHARE_IDLE_S = SHARE_LOCK_MS / 1000 + 10  # the final drainer stops after this long idle
# The transactional workload's final read_committed read waits at most this long for the last
# stable offset to reach the high watermark: well past the producers' transaction.timeout.ms,
# after which the coordinator aborts whatever a producer left open. Still below it: stuck.
TXN_TIMEOUT_MS = 10_000
LSO_WAIT_S = 45.0
FIND_COORDINATOR_ATTEMPTS = 10


@dataclass
class ChaosConfig:
    brokers: int = 3
    controllers: int = 1            # > 1: a controller quorum
    time_limit_s: float = 60.0
    faults: list[str] = field(default_factory=lambda: list(DEFAULT_FAULTS))
    acks: str = "all"
    truncation: str = DEFAULT_TRUNCATION.value
    unclean: bool = False
    eligible_leader_replicas: bool = True  # KIP-966 (eligible.leader.replicas.version=1)
    seed: int = 1
    topics: str = "chaos-a:2,chaos-b:2"
    rate: float = 40.0              # sends per second per producer
    quiet_s: float = 5.0            # after recovery, before the clients stop
    recovery_timeout_s: float = 90.0
    name: str = "chaos"             # prefix of namespace names
    work_dir: Path | None = None    # kept; default: a temporary directory, removed when valid
    crash_s: float = 20.0           # consumers are rebuilt about this often
    report_dir: Path | None = None  # an HTML report is written here
    workload: str = "plain"         # "txn": Jepsen's queue with transactions
    txn_producers: int = 3          # transactional producers (workload "txn"); --rate is
                                    # transactions per second for each
    group_members: int = 3          # the consumer-group (or share-group) workload's members
    group_protocol: str = "classic"  # the consumer-group workload's group.protocol (KIP-848:
                                     # "consumer"; "mixed": both, members switching)
    # read, restart every broker in turn (SIGTERM), then the final read; None: the
    # transactional workload does, the plain one does not
    final_restart: bool | None = None
    # ``cluster up``'s security modes (``cluster.secure.MODES``); None: plaintext. ``sasl_ssl``:
    # every client (workload, final reads, FindCoordinator) logs in as the admin
    security: str | None = None
    # End the fault schedule (the faults left, the rest of the time limit) once the history so
    # far shows an inconsistent offset (``_exposed``): a run meant to catch an unsafe setting
    # stops once it has; the verdict is still the checker's over the whole run.
    end_on_anomaly: bool = False

    @property
    def restarts_before_final_read(self) -> bool:
        return self.workload == "txn" if self.final_restart is None else self.final_restart

    @classmethod
    def default_faults(cls, workload: str) -> list[str]:
        if workload == "group":
            return list(GROUP_DEFAULT_FAULTS)
        return list(TXN_DEFAULT_FAULTS if workload == "txn" else DEFAULT_FAULTS)

    def validate(self) -> None:
        if self.brokers < 3:
            raise ValueError("--brokers must be at least 3 (replication factor 3)")
        if not 1 <= self.controllers <= 9:
            raise ValueError("--controllers must be between 1 and 9")
        if self.time_limit_s <= 0:
            raise ValueError("--time-limit-s must be positive")
        if self.quiet_s < 0:
            raise ValueError("--quiet-s must not be negative")
        if self.end_on_anomaly and self.workload != "plain":
            raise ValueError("--end-on-anomaly needs --workload plain")
        if self.acks not in ("all", "1"):
            raise ValueError("--acks must be all or 1")
        if self.workload not in WORKLOADS:
            raise ValueError(f"--workload must be one of {', '.join(WORKLOADS)}")
        if self.workload == "txn" and self.acks != "all":
            raise ValueError("--workload txn needs --acks all (transactional producers are "
                             "idempotent)")
        if not 1 <= self.txn_producers <= 20:
            raise ValueError("--txn-producers must be between 1 and 20")
        if not 1 <= self.group_members <= 20:
            raise ValueError("--group-members must be between 1 and 20")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"--group-protocol must be one of {', '.join(GROUP_PROTOCOLS)}")
        if self.group_protocol != "classic" and self.workload != "group":
            raise ValueError(f"--group-protocol {self.group_protocol} needs --workload group")
        Truncation.parse(self.truncation)
        if self.security is not None and self.security not in MODES:
            raise ValueError(f"--security must be one of {', '.join(MODES)}")
        member_faults = sorted(GROUP_ONLY & set(expand(self.faults)))
        if member_faults and self.workload != "group":
            raise ValueError(f"fault {', '.join(member_faults)} needs --workload group")

    @property
    def keys(self) -> list[str]:
        out = []
        for item in self.topics.split(","):
            name, _, count = item.partition(":")
            out += [f"{name}-{p}" for p in range(int(count or 1))]
        return out


def _broker_settings(config: ChaosConfig) -> dict[str, str]:
    settings = {"replica.lag.time.max.ms": "3000", "min.insync.replicas": "2",
                "auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "100"}
    if config.workload == "share":
        settings.update({"group.share.enable": "true", "share.auto.offset.reset": "earliest",
                         "group.share.record.lock.duration.ms": str(SHARE_LOCK_MS),
                         "group.share.delivery.count.limit": str(SHARE_DELIVERY_COUNT_LIMIT),
                         "group.share.heartbeat.interval.ms": "1000"})
    if config.workload == "group" and config.group_protocol in ("consumer", "mixed"):
        # KIP-848: the session and heartbeat are the broker's to say (a member cannot ask for
        # them); the classic members ask for 6 s / 0.5 s, and these are the same, so a dead
        # member's partitions move on as soon under either protocol
        settings.update({"group.consumer.session.timeout.ms": str(CONSUMER_SESSION_MS),
                         "group.consumer.heartbeat.interval.ms": str(CONSUMER_HEARTBEAT_MS)})
    if POWER_CUTS & set(expand(config.faults)):
        settings["floodmark.unsafe.power.loss.page.cache"] = "true"
    if Truncation.parse(config.truncation) is not DEFAULT_TRUNCATION:
        settings["floodmark.truncation"] = Truncation.parse(config.truncation).value
        settings["floodmark.truncation.allow.unsafe"] = "true"
    return settings


def _controller_settings(config: ChaosConfig) -> dict[str, str]:
    return {"broker.session.timeout.ms": "2000",
            "unclean.leader.election.enable": "true" if config.unclean else "false",
            # leaders stay where faults leave them (a rebalance is a fault of its own)
            "auto.leader.rebalance.enable": "false",
            "eligible.leader.replicas.version": "1" if config.eligible_leader_replicas else "0"}


@contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM (and SIGINT, as usual) interrupt the run so every ``finally`` cleans up."""

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class _Workers:
    """The client processes in the clients' namespace."""

    def __init__(self, lab: Lab, config: ChaosConfig, bootstrap: str, work: Path,
                 command_config: Path | None = None) -> None:
        """``command_config``: the clients' security settings (a secured cluster's
        ``client.properties``)."""
        self.lab, self.config, self.bootstrap, self.work = lab, config, bootstrap, work
        self.command_config = command_config
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        # process -> bytes read, acknowledgements seen, ``ok`` lines seen (of any kind)
        self._counted: dict[str, tuple[int, int, int]] = {}
        self.stuck: list[dict[str, Any]] = []  # processes SIGTERM did not end (``capture``)
        (work / "history").mkdir(parents=True, exist_ok=True)
        (work / "logs").mkdir(parents=True, exist_ok=True)

    def history_path(self, process: str) -> Path:
        return self.work / "history" / f"{process}.jsonl"

    def start(self, process: str, role: str, *extra: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "floodmark.chaos.workload", role, "--process", process,
                "--bootstrap", self.bootstrap, "--topics", self.config.topics,
                "--history", str(self.history_path(process)), "--acks", self.config.acks,
                "--seed", str(self.config.seed), *extra]
        if self.command_config is not None:  # a file: the password stays off the command line
            argv += ["--command-config", str(self.command_config)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.work / "logs" / f"{process}.log", "ab") as log:
            proc = self.lab.popen(CLIENTS_HOST, argv, stdout=log, stderr=log,
                                  stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.procs[process] = proc
        return proc

    def _count(self) -> dict[str, tuple[int, int, int]]:
        """``_counted`` brought up to date (reads only what was appended since the last
        call)."""
        needle = (b'"type":"ok","f":"commit"' if self.config.workload == "txn"
                  else b'"type":"ok","f":"send"')
        for process in list(self.procs):
            path = self.history_path(process)
            done, count, oks = self._counted.get(process, (0, 0, 0))
            if path.exists():
                with open(path, "rb") as fh:
                    fh.seek(done)
                    chunk = fh.read()
                whole = chunk[:chunk.rfind(b"\n") + 1]
                self._counted[process] = (done + len(whole), count + whole.count(needle),
                                          oks + whole.count(b'"type":"ok"'))
        return self._counted

    def acknowledged(self) -> int:
        """Acknowledged sends so far; in the transactional workload, committed
        transactions."""
        return sum(acks for _done, acks, _oks in self._count().values())

    def progress(self) -> dict[str, int]:
        """process -> ``ok`` lines so far (an acknowledgement, a poll, a commit...)."""
        return {process: oks for process, (_done, _acks, oks) in self._count().items()}

    def all_moved_on(self, since: dict[str, int]) -> bool:
        """Every client still running has written an ``ok`` line after ``since``
        (``progress``): each producer had a send acknowledged, each consumer a poll."""
        now = self.progress()
        return all(now.get(process, 0) > since.get(process, 0)
                   for process, proc in list(self.procs.items()) if proc.poll() is None)

    def stop(self, timeout_s: float = 60.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process, proc in self.procs.items():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.capture(process)
                proc.kill()
                proc.wait(5)

    def capture(self, process: str) -> None:
        """A process SIGTERM did not end, before it is killed: its stacks, librdkafka's native
        frames too (``py-spy dump --native``), and in the group workload the coordinator's
        view of the group (``floodmark group describe``), into ``logs/``; listed in
        ``stuck``."""
        proc, logs = self.procs[process], self.work / "logs"
        found: dict[str, Any] = {"process": process, "pid": proc.pid, "time": time.time()}
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        dump = logs / f"{process}.py-spy.txt"
        try:
            done = subprocess.run([spy, "dump", "--native", "--pid", str(proc.pid)],
                                  capture_output=True, text=True, timeout=60)
            dump.write_text(done.stdout + done.stderr)
            found["py_spy"] = str(dump)
        except (OSError, subprocess.SubprocessError) as exc:
            found["py_spy_error"] = f"{type(exc).__name__}: {exc}"
        if self.config.workload == "group":
            view = logs / f"{process}.group-describe.txt"
            argv = [sys.executable, "-m", "floodmark.cli", "group", "describe", GROUP,
                    "--bootstrap-server", self.bootstrap]
            if self.command_config is not None:
                argv += ["--command-config", str(self.command_config)]
            with open(view, "wb") as out:
                describe = self.lab.popen(CLIENTS_HOST, argv, stdout=out, stderr=out,
                                          stdin=subprocess.DEVNULL)
                try:
                    describe.wait(60)
                except subprocess.TimeoutExpired:
                    describe.kill()
                    describe.wait(5)
            found["group_describe"] = str(view)
        self.stuck.append(found)

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


class _GroupMembers:
    """The consumer-group workload's members (``nemesis.Members``): processes ``gm1``,
    ``gm2``, ...; a member that ends is never restarted under its name, a new one joins.

    With ``group_protocol`` "mixed" each member has a protocol of its own: the starting ones
    ``protocol_switch.initial``'s, and a member that joins after one ended (a ``group`` fault)
    speaks the other protocol than the last one that ended; an extra member (``member-join``) the
    protocol fewer running members speak. Thread-safe: the protocol switches run beside the
    nemesis."""

    def __init__(self, workers: _Workers, duration_s: str, group_protocol: str) -> None:
        self.workers, self.duration_s = workers, duration_s
        self.group_protocol = group_protocol
        self.count = 0
        self.protocols: dict[str, str] = {}  # process -> the protocol it speaks
        self._returning: str | None = None  # mixed: the protocol the next join comes back with
        self._killed: dict[str, float] = {}  # process -> when it was SIGKILLed (monotonic)
        self._lock = threading.RLock()

    @property
    def mixed(self) -> bool:
        return self.group_protocol == "mixed"

    def start(self, members: int) -> None:
        """The starting members."""
        protocols = initial(members) if self.mixed else [self.group_protocol] * members
        for protocol in protocols:
            self._join(protocol)

    def join(self) -> str:
        with self._lock:
            if not self.mixed:
                return self._join(self.group_protocol)
            if self._returning is not None:
                protocol, self._returning = self._returning, None
                return self._join(protocol)
            speaking = list(self.running_protocols().values())
            fewer = min(("consumer", "classic"), key=speaking.count)
            return self._join(fewer)

    def _join(self, protocol: str) -> str:
        with self._lock:
            self.count += 1
            process = f"gm{self.count}"
            self.workers.start(process, "group-member", "--group", GROUP,
                               "--group-protocol", protocol, "--duration-s", self.duration_s)
            self.protocols[process] = protocol
            return process

    def running(self) -> list[str]:
        with self._lock:
            return [name for name, proc in self.workers.procs.items()
                    if name.startswith("gm") and proc.poll() is None]

    def running_protocols(self) -> dict[str, str]:
        """process -> protocol of the members alive now."""
        with self._lock:
            return {name: self.protocols[name] for name in self.running()}

    def present_protocols(self) -> dict[str, str]:
        """``running_protocols`` and the members SIGKILLed less than ``FENCED_AFTER_S`` ago
        (still in the group until the coordinator fences them)."""
        with self._lock:
            now = time.monotonic()
            return {**{name: self.protocols[name] for name, at in self._killed.items()
                       if now - at < FENCED_AFTER_S}, **self.running_protocols()}

    def leave(self, process: str) -> None:
        with self._lock:
            self._end(process, kill=False)
            if self.mixed:
                self._returning = other(self.protocols[process])

    def kill(self, process: str) -> None:
        with self._lock:
            self._end(process, kill=True)
            if self.mixed:
                self._returning = other(self.protocols[process])

    def switch(self, process: str, kill: bool) -> str:
        """End ``process`` (SIGKILL or SIGTERM) and start a member of the other protocol; its
        name."""
        with self._lock:
            self._end(process, kill)
            return self._join(other(self.protocols[process]))

    def _end(self, process: str, kill: bool) -> None:
        proc = self.workers.procs[process]
        if kill:
            proc.kill()
            proc.wait(5)
            self._killed[process] = time.monotonic()
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            self.workers.capture(process)
            proc.kill()
            proc.wait(5)


class _ProtocolSwitches:
    """``--group-protocol mixed``: at each of ``protocol_switch.switch_plan``'s times, one member
    is ended (SIGTERM: revoke and leave; or, one time in four, SIGKILL: fenced at its session
    timeout) and a member of the other protocol joins; which protocol's member
    (``protocol_switch.retire``) walks the count of consumer-protocol members down to none
    (a downgrade) and up to all (the first step an upgrade). A thread of its own, so the
    switches come while the nemesis's faults are on; each is recorded (``records``)."""

    def __init__(self, members: _GroupMembers, seed: int, time_limit_s: float,
                 say: Callable[[str], None]) -> None:
        self.members, self.say = members, say
        self.plan = switch_plan(seed, time_limit_s)
        self.records: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="protocol-switches",
                                        daemon=True)
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        downwards = True
        for planned in self.plan:
            at, kill = planned.at_s, planned.kill
            if self._stop.wait(max(0.0, self._started + at - time.monotonic())):
                return
            record: dict[str, Any] = {"at_s": at, "start": time.time()}
            try:
                running = self.members.running_protocols()
                if not running:
                    record["skipped"] = "no member is running"
                    continue
                present = self.members.present_protocols()
                protocol, downwards = retire(list(present.values()), downwards)
                speaking = [p for p, speaks in running.items() if speaks == protocol]
                if not speaking:
                    record["skipped"] = (f"the {protocol} members in the group are killed ones "
                                         f"not fenced yet")
                    continue
                target = min(speaking, key=lambda p: int(p[2:]))  # the oldest (gm2, gm10)
                joined = self.members.switch(target, kill)
                record.update(ended=target, how="kill" if kill else "leave",
                              protocol=protocol, joined=joined, joined_protocol=other(protocol))
                self.say(f"protocol switch: {target} ({protocol}) "
                         f"{'killed' if kill else 'left'}, {joined} joins ({other(protocol)})")
            except Exception as exc:  # a failed switch is recorded, the run goes on
                record["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                record["end"] = time.time()
                self.records.append(record)


def _wait(what: str, ready: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(0.25)
    return False


def run(config: ChaosConfig, say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """One chaos run; returns the result object (``valid``, ``anomalies``, ``faults``, ...).
    Raises ``LabError`` when namespaces cannot be made here, ``ValueError`` on a bad config."""
    config.validate()
    schedule = plan(config.seed, config.faults, config.time_limit_s,
                    eligible_leader_replicas=config.eligible_leader_replicas)
    keep = config.work_dir is not None
    work = Path(config.work_dir or tempfile.mkdtemp(prefix=f"{config.name}-run-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    brokers = [f"b{i}" for i in range(1, config.brokers + 1)]
    controllers = [host_of(c) for c in controller_ids(config.controllers)]
    result: dict[str, Any] = {}
    with _signals_raise(), Lab([*controllers, *brokers, CLIENTS_HOST], prefix=config.name) as lab:
        cluster = LabCluster(lab, work / "cluster", config.brokers, _broker_settings(config),
                             _controller_settings(config), controllers=config.controllers,
                             security=config.security)
        workers: _Workers | None = None
        observer: Observer | None = None
        try:
            say(f"lab {lab.id}: controller and {config.brokers} brokers"
                f"{'' if config.security is None else ', security ' + config.security}; "
                f"work dir {work}")
            cluster.start()
            workers = _Workers(lab, config, cluster.bootstrap, work,
                               cluster.client_properties_path)
            setup = workers.start("setup", "setup", "--duration-s", "120")
            if setup.wait(150) != 0:
                raise RuntimeError(f"topic setup failed; see {work / 'logs' / 'setup.log'}")
            observer = Observer(lab.ns(CLIENTS_HOST),
                                [cluster.address(c) for c in cluster.controller_ids],
                                security=cluster.channel_security)
            observer.start()
            result = _workload_and_faults(config, schedule, lab, cluster, workers, observer,
                                          work, say)
        finally:
            # each step on its own: one failing must not leave processes behind
            for step in (observer.stop if observer is not None else None,
                         workers.kill if workers is not None else None,
                         cluster.kill_all):
                if step is None:
                    continue
                try:
                    step()
                except Exception as exc:
                    say(f"cleanup: {step.__qualname__}: {exc}")
    if config.report_dir is not None and result:
        from floodmark.chaos.report import write_report

        result["report"] = str(write_report(config.report_dir, result, events_of(result)))
    if not keep and result.get("valid"):
        shutil.rmtree(work, ignore_errors=True)
        result["history"] = None
    else:
        result["work_dir"] = str(work)
    return result


def _workload_and_faults(config: ChaosConfig, schedule: list[Any], lab: Lab, cluster: LabCluster,
                         workers: _Workers, observer: Observer, work: Path,
                         say: Callable[[str], None]) -> dict[str, Any]:
    duration = str(config.time_limit_s + config.recovery_timeout_s + 120)
    rate = str(config.rate)
    crash = str(config.crash_s)
    txn = config.workload == "txn"
    group = config.workload == "group"
    share = config.workload == "share"
    internal = [TXN_STATE_KEY] if txn else [OFFSETS_KEY]
    members: _GroupMembers | None = None
    txn_processes = [f"tp{i}" for i in range(1, config.txn_producers + 1)] if txn else []
    if txn:
        for process in txn_processes:
            workers.start(process, "producer-txn", "--rate", rate, "--duration-s", duration,
                          "--txn-timeout-ms", str(TXN_TIMEOUT_MS))
        workers.start("ca1", "consumer-assign", "--crash-s", crash, "--duration-s", duration,
                      "--isolation", "read_committed")
    elif group:
        workers.start("cp1", "producer-confluent", "--rate", rate, "--duration-s", duration)
        workers.start("kp1", "producer-kafka-python", "--rate", rate, "--duration-s", duration)
        members = _GroupMembers(workers, duration, config.group_protocol)
        members.start(config.group_members)
    elif share:
        workers.start("cp1", "producer-confluent", "--rate", rate, "--duration-s", duration)
        workers.start("kp1", "producer-kafka-python", "--rate", rate, "--duration-s", duration)
        for n in range(1, config.group_members + 1):
            workers.start(f"sm{n}", "share-member", "--group", SHARE_GROUP,
                          "--duration-s", duration)
    else:
        workers.start("cp1", "producer-confluent", "--rate", rate, "--duration-s", duration)
        workers.start("kp1", "producer-kafka-python", "--rate", rate, "--duration-s", duration)
        workers.start("ca1", "consumer-assign", "--crash-s", crash, "--duration-s", duration)
        workers.start("cg1", "consumer-group-confluent", "--crash-s", crash,
                      "--duration-s", duration)
        workers.start("kg1", "consumer-group-kafka-python", "--crash-s", crash,
                      "--duration-s", duration)
    if not _wait("first acknowledgements", lambda: workers.acknowledged() > 0, 90):
        raise RuntimeError(f"no write was acknowledged; see {work / 'logs'}")
    say(f"workload running; {len(schedule)} faults over {config.time_limit_s:.0f}s")
    executor = namespace_executor(lab.ns(CLIENTS_HOST))

    def coordinators(key_type: int, ids: list[str]) -> Callable[[], list[int]]:
        """FindCoordinator (key_type 1: transactional ids, 0: groups) asked from the clients'
        namespace: the brokers it names."""

        def ask() -> list[int]:
            # a coordinator being elected answers COORDINATOR_NOT_AVAILABLE: ask again, bounded
            with ClusterClient(cluster.bootstrap, timeout_s=3.0, client_id="chaos-nemesis",
                               security=cluster.client_security) as client:
                for _attempt in range(FIND_COORDINATOR_ATTEMPTS):
                    resp = client.request_any(10, 4, {"key_type": key_type,
                                                      "coordinator_keys": ids})
                    named = [int(c.node_id) for c in resp.coordinators
                             if not int(c.error_code)]
                    if named:
                        return named
                    time.sleep(0.3)
            return []

        return lambda: list(run_in(executor, ask, 30.0))

    txn_coordinators = coordinators(1, [f"chaos-{p}" for p in txn_processes] or ["chaos-tp1"])
    nemesis = Nemesis(lab, cluster, observer, config.keys, say,
                      power_loss=bool(POWER_CUTS & set(expand(config.faults))),
                      sync_keys=[*config.keys, *internal],
                      eligible_leader_replicas=config.eligible_leader_replicas,
                      txn_coordinators=txn_coordinators,
                      group_coordinators=coordinators(0, [GROUP]), members=members)
    switches = (_ProtocolSwitches(members, config.seed, config.time_limit_s, say)
                if members is not None and members.mixed else None)
    started = time.monotonic()
    faults: list[dict[str, Any]] = []
    ended_early: dict[str, Any] | None = None

    def exposed() -> bool:
        nonlocal ended_early
        if config.end_on_anomaly and ended_early is None:
            found = _exposed(work)
            if found:
                ended_early = {"after_faults": len(faults),
                               "faults_left": len(schedule) - len(faults),
                               "at_s": round(time.monotonic() - started, 3),
                               "inconsistent_offsets": found[:3]}
                say(f"inconsistent offsets after {len(faults)} faults: the schedule ends")
        return ended_early is not None

    try:
        if switches is not None:
            switches.start()
        for fault in schedule:
            delay = started + fault.start_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if faults and exposed():
                break
            faults.append(nemesis.run(fault))
        while not exposed():
            rest = started + config.time_limit_s - time.monotonic()
            if rest <= 0:
                break
            # a look at the history costs ~0.5 CPU s per 20,000 events: every 2 s at most
            time.sleep(min(rest, 2.0) if config.end_on_anomaly else rest)
    finally:
        if switches is not None:
            switches.stop()
        nemesis.heal_all()
        executor.shutdown(wait=False, cancel_futures=True)
    healed_at = workers.acknowledged()
    keys = [*config.keys, *internal]
    recovered = _wait("recovery", lambda: observer.all_in_sync(keys)
                      and workers.acknowledged() > healed_at + 20, config.recovery_timeout_s)
    say("cluster recovered" if recovered else "cluster did not recover in time")
    # The quiet period: until every client still running has moved on in the healed cluster
    # (a producer an acknowledgement, a consumer a poll), at most ``quiet_s``.
    moved_from = workers.progress()
    _wait("quiet period", lambda: workers.all_moved_on(moved_from), config.quiet_s)
    workers.stop()
    if config.restarts_before_final_read:
        # What the live state serves, then the same after every broker rebuilt its state from
        # its files (issue 28: the rebuilt aborted-transaction index): the reads before are
        # ordinary reads of processes ``live``/``live-rc``, the ones after are the final reads.
        _final_reads(workers, txn, LIVE_PROCESS, LIVE_COMMITTED_PROCESS)
        record = nemesis.rolling_restart(random.Random(config.seed))
        record["before_final_read"] = True
        faults.append(record)
        recovered = _wait("recovery after the restarts", lambda: observer.all_in_sync(keys),
                          config.recovery_timeout_s) and recovered
    _final_reads(workers, txn, FINAL_PROCESS, FINAL_COMMITTED_PROCESS)
    if group:
        workers.start(GROUP_FINAL_PROCESS, "group-offsets", "--group", GROUP,
                      "--duration-s", "60").wait(90)
    if share:
        # every record written comes at least once: a drainer of the group, until idle
        # (records the stopped members held come back when their locks expire)
        workers.start(SHARE_FINAL_PROCESS, "share-member", "--group", SHARE_GROUP,
                      "--idle-s", str(SHARE_IDLE_S), "--duration-s", "240").wait(300)
    say("final reads done")
    in_sync = {k: list((observer.view(k) or {}).get("isr", [])) for k in config.keys}
    timeline = list(observer.timeline)
    controller_up = list(observer.controller_up)
    observer.stop()
    cluster.stop(timeout_s=20.0)
    replicas: dict[str, dict[int, dict[int, str | None]]] = {}
    for key in config.keys:
        topic, _, index = key.rpartition("-")
        for broker in cluster.broker_ids:
            values = read_partition_data(cluster.partition_dir(broker, topic, int(index)))
            replicas.setdefault(key, {})[broker] = {
                o: None if v is None else value_id(v) for o, v in values.items()}
    events = merge(sorted((work / "history").glob("*.jsonl")), work / "history.jsonl")
    if group:
        stored_commits: dict[str, list[int]] = {}
        for broker in cluster.broker_ids:
            data_dir = cluster.partition_dir(broker, OFFSETS_TOPIC, 0).parent
            for key, offsets in read_stored_commits(data_dir, GROUP).items():
                if len(offsets) > len(stored_commits.get(key, [])):
                    stored_commits[key] = offsets  # the fullest replica's
        verdict = check_group(events, replicas, in_sync, group=GROUP,
                              stored_commits=stored_commits)
        # KIP-848's online migration, as the coordinators logged it
        verdict.group["conversions"] = read_conversions(
            [cluster.log_path(b) for b in cluster.broker_ids], GROUP)
    elif share:
        verdict = check_share(events, replicas, in_sync, group=SHARE_GROUP,
                              limit=SHARE_DELIVERY_COUNT_LIMIT)
    else:
        verdict = (check_txn if txn else check)(events, replicas, in_sync)
    if verdict.counts.get("duplicated"):
        # how each copy was written (producer id, epoch, sequence), from the fullest replica
        verdict.duplicates_by_origin = explain_replicas(
            verdict.anomalies["duplicated"], replicas, cluster.partition_dir)
        client_resent_only(verdict)
    result: dict[str, Any] = {
        **verdict.as_json(), "faults": faults, "seed": config.seed,
        "recovered": recovered,
        "config": {"brokers": config.brokers, "controllers": config.controllers,
                   "time_limit_s": config.time_limit_s,
                   "faults": config.faults, "acks": config.acks,
                   "truncation": config.truncation, "unclean": config.unclean,
                   "eligible_leader_replicas": config.eligible_leader_replicas,
                   "topics": config.topics, "rate": config.rate,
                   "security": config.security,
                   "workload": config.workload,
                   "final_restart": config.restarts_before_final_read,
                   **({"txn_producers": config.txn_producers} if txn else {}),
                   **({"group_members": config.group_members} if group or share else {}),
                   **({"group_protocol": config.group_protocol} if group else {})},
        "history": str(work / "history.jsonl"),
        "leaders": timeline, "controller_up": controller_up,
        **({"protocol_switches": switches.records} if switches is not None else {}),
        **({"ended_early": ended_early} if ended_early is not None else {}),
        **({"stuck": workers.stuck, "member_stalls": member_stalls(work / "logs")}
           if group else {}),
        **longest_ack_gap(events),
    }
    (work / "result.json").write_text(json.dumps(result, indent=1))
    return result


def _exposed(work: Path) -> list[dict[str, Any]]:
    """The inconsistent offsets (``checker.check``) the history so far shows: two values at one
    offset, or one value at two, each seen by an acknowledgement or a read. Facts no later event
    undoes, so the run's final verdict has them too."""
    events = merged(sorted((work / "history").glob("*.jsonl")))
    return check(events).anomalies["inconsistent_offsets"]


def member_stalls(logs: Path) -> list[dict[str, Any]]:
    """The group members whose watchdog fired (``group_member.STALL_S`` without progress):
    per member, how many times, and its first dump's innermost frame of each thread."""
    out = []
    for log in sorted(logs.glob("gm*.log")):
        text = log.read_text(errors="replace")
        if "Timeout (" not in text:
            continue
        first = text.split("Timeout (")[1].splitlines()  # the first dump
        tops = [first[i + 1].strip() for i, line in enumerate(first[:-1])
                if line.startswith(("Thread ", "Current thread "))]
        out.append({"process": log.stem, "dumps": text.count("Timeout ("), "innermost": tops})
    return out


def _final_reads(workers: _Workers, txn: bool, process: str, committed_process: str) -> None:
    """The plain workload: one read (read_committed, every offset). The transactional one:
    read_uncommitted to the high watermark (every record, aborted ones too), then
    read_committed until the last stable offset reaches it (bounded: stuck otherwise)."""
    if not txn:
        workers.start(process, "final-read", "--duration-s", "120").wait(150)
        return
    workers.start(process, "final-read", "--duration-s", "120", "--isolation",
                  "read_uncommitted", "--sparse").wait(150)
    workers.start(committed_process, "final-read", "--duration-s", str(LSO_WAIT_S),
                  "--isolation", "read_committed", "--sparse").wait(LSO_WAIT_S + 60)


def events_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The merged history a result points at."""
    return list(read_events(result["history"]))


__all__ = ["CONTROLLER_ID", "ChaosConfig", "events_of", "run"]
