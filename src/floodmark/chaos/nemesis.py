"""Carrying out the fault schedule against a running ``LabCluster``, and watching the cluster.

``Observer`` is a thread inside the lab's client namespace (which no fault ever cuts) that asks
the controller for every partition's leader, leader epoch and ISR twice a second and keeps the
changes as a timeline. ``Nemesis.run(fault)`` starts one fault, keeps it for its duration and
heals it (a restarted node gets its old address back), returning what it did.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from floodmark.chaos.netns import Lab, enter_namespace
from floodmark.chaos.nodes import LabCluster, host_of
from floodmark.chaos.schedule import Fault
from floodmark.controller import rpc
from floodmark.security import PLAINTEXT, ClientSecurity


class Observer(threading.Thread):
    def __init__(self, netns_name: str, controller_addresses: Sequence[str],
                 interval_s: float = 0.5, security: ClientSecurity = PLAINTEXT) -> None:
        """``security``: how to call the controllers (a secured cluster's admin
        certificate)."""
        super().__init__(name="chaos-observer", daemon=True)
        self.security = security
        self.netns_name = netns_name
        self.controller_addresses = list(controller_addresses)
        self.active: str | None = None  # the active controller's address, as last seen
        self.interval_s = interval_s
        self.timeline: list[dict[str, Any]] = []   # one entry per change of a partition
        self.partitions: dict[str, dict[str, Any]] = {}   # key -> registration
        self.controller_up: list[tuple[float, bool]] = []
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        enter_namespace(self.netns_name)
        while not self._halt.is_set():
            self._update(self._active_status())
            self._halt.wait(self.interval_s)

    def _active_status(self) -> dict[str, Any] | None:
        """The status of the active controller (the one seen last is asked first)."""
        order = sorted(self.controller_addresses, key=lambda a: a != self.active)
        for address in order:
            try:
                answer = rpc.blocking_call(address, "status", {}, 1.0, self.security)
            except rpc.RpcError:
                continue
            result = answer.get("result")
            if isinstance(result, dict) and result.get("active", True):
                self.active = address
                return result
        return None

    def _update(self, status: dict[str, Any] | None) -> None:
        now = time.time()
        with self._lock:
            up = status is not None
            if not self.controller_up or self.controller_up[-1][1] != up:
                self.controller_up.append((now, up))
            if status is None:
                return
            for topic, parts in status.get("topics", {}).items():
                for index, reg in parts.items():
                    key = f"{topic}-{index}"
                    view = {"leader": int(reg["leader"]), "leader_epoch": reg["leader_epoch"],
                            "isr": sorted(reg["isr"]), "elr": sorted(reg.get("elr", [])),
                            "replicas": list(reg["replicas"])}
                    if self.partitions.get(key) != view:
                        self.partitions[key] = view
                        self.timeline.append({"time": now, "key": key, **view})

    def stop(self) -> None:
        self._halt.set()
        self.join(5)

    def view(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            reg = self.partitions.get(key)
            return dict(reg) if reg else None

    def all_in_sync(self, keys: Sequence[str]) -> bool:
        """Every partition has a leader and its whole replica set in the ISR (as of the
        controller's last answer, which must be recent)."""
        with self._lock:
            if not self.controller_up or not self.controller_up[-1][1]:
                return False
            for key in keys:
                reg = self.partitions.get(key)
                if reg is None or reg["leader"] < 0 or set(reg["isr"]) != set(reg["replicas"]):
                    return False
            return True


    def sole_holders(self, keys: Sequence[str], cut: Collection[int]) -> list[str]:
        """The partitions whose committed records are on fewer than two brokers that may lead
        with them: ISR and ELR members (KIP-966: each holds every committed record), without
        the brokers in ``cut`` (power-cut and not yet back in their ISRs). All of them when the
        controller's view is not recent."""
        with self._lock:
            if not self.controller_up or not self.controller_up[-1][1]:
                return list(keys)
            out = []
            for key in keys:
                reg = self.partitions.get(key)
                holders = set(reg["isr"]) | set(reg.get("elr", [])) if reg else set()
                if len(holders - set(cut)) < 2:
                    out.append(key)
            return out

    def caught_up(self, broker_id: int, keys: Sequence[str]) -> bool:
        """``broker_id`` is in the ISR of every partition (of ``keys``) it is a replica of."""
        with self._lock:
            for key in keys:
                reg = self.partitions.get(key)
                if reg is None or (broker_id in reg["replicas"] and broker_id not in reg["isr"]):
                    return False
            return True


# Faults that SIGKILL one broker: with the brokers' power-loss page cache each is a power cut.
BROKER_KILLS = frozenset({"kill-one", "kill-leader", "power-loss", "pause-then-power-cut",
                          "kill-txn-coordinator", "kill-group-coordinator",
                          "failover-rebalance"})
TXN_STATE_KEY = "__transaction_state-0"
OFFSETS_KEY = "__consumer_offsets-0"


class Members(Protocol):
    """The consumer-group workload's member processes, for the ``group`` faults."""

    def running(self) -> list[str]:
        """The members alive now, by process name."""
        ...

    def leave(self, process: str) -> None:
        """SIGTERM: the member closes (revoke, LeaveGroup); returns once it has exited."""
        ...

    def kill(self, process: str) -> None:
        """SIGKILL: the member vanishes without a word."""
        ...

    def join(self) -> str:
        """A new member process; its name."""
        ...
CATCH_UP_S = 30.0   # a restarted broker back in its ISRs: at most this long
IN_SYNC_WAIT_S = 30.0


class Nemesis:
    def __init__(self, lab: Lab, cluster: LabCluster, observer: Observer, keys: Sequence[str],
                 say: Callable[[str], None] = lambda _m: None, *, power_loss: bool = False,
                 sync_keys: Sequence[str] | None = None,
                 in_sync_wait_s: float = IN_SYNC_WAIT_S,
                 eligible_leader_replicas: bool = False,
                 txn_coordinators: Callable[[], Sequence[int]] | None = None,
                 group_coordinators: Callable[[], Sequence[int]] | None = None,
                 members: Members | None = None) -> None:
        """``power_loss``: the brokers lose unsynced writes when killed.

        With ``eligible_leader_replicas`` (the controllers run KIP-966, the default) a power cut
        no longer waits for whole ISRs (its record says whether they were: ``isr_whole``): a
        last ISR member that comes back from an unclean shutdown leaves the ISR and the ELR, and
        a replica that left the ISR while it was below min ISR (the ELR) leads instead, holding
        every committed record. It waits (bounded, else skipped) only while some partition's
        committed records are on fewer than two such holders, not counting brokers power-cut
        earlier that have not caught up since: a cut then is a second failure of the replicas
        holding them, which no replication survives (all-faults seed 4: leader 1 cut with ISR
        [1], ELR [3]; 3 elected; 0.3 s later 3 cut too, its records only in its page cache).

        Without it (``eligible.leader.replicas.version=0``) SPEC §4's premise allows a kill only
        while no other replica has failed, and a replica out of the ISR has (it lacks what the
        ISR acknowledged), as the simulator's explorer counts it: such a kill waits until every
        partition's whole replica set is in the ISR (at most ``in_sync_wait_s``;
        ``sync_keys``: the partitions to watch, default ``keys``), else it is skipped and
        recorded as skipped. Without the wait a power cut of the last ISR member right after a
        partition fault shrank the ISR to it loses every acknowledged write: it is elected
        again from its empty log and the others truncate to it (all-faults run, seed 4;
        KIP-966's last replica standing).

        ``txn_coordinators``: asks the cluster which brokers coordinate the workload's
        transactional ids (FindCoordinator, key_type 1), for the ``*-txn-coordinator``
        faults; ``group_coordinators`` the same for the workload's consumer group (key_type
        0), for the ``*-group-coordinator`` faults; ``members``: the group's member processes,
        for the ``group`` faults."""
        self.lab = lab
        self.cluster = cluster
        self.observer = observer
        self.keys = list(keys)
        self.say = say
        self.power_loss = power_loss
        self.eligible_leader_replicas = eligible_leader_replicas
        self.power_cut: set[int] = set()  # power-cut brokers not yet back in all their ISRs
        self.sync_keys = list(sync_keys) if sync_keys is not None else list(keys)
        self.in_sync_wait_s = in_sync_wait_s
        self.brokers = list(cluster.broker_ids)
        self.controllers = list(cluster.controller_ids)
        self.txn_coordinators = txn_coordinators
        self.group_coordinators = group_coordinators
        self.members = members

    # -- helpers ------------------------------------------------------------------------------
    def _leader(self, rng: random.Random) -> tuple[str, int]:
        key = self.keys[rng.randrange(len(self.keys))]
        reg = self.observer.view(key)
        leader = reg["leader"] if reg else -1
        if leader not in self.brokers:
            leader = self.brokers[rng.randrange(len(self.brokers))]
        return key, leader

    def _others(self, node_ids: Sequence[int]) -> list[str]:
        """Every server host except ``node_ids`` (clients are never cut)."""
        return [host_of(n) for n in [*self.controllers, *self.brokers] if n not in node_ids]

    def _restart(self, node_ids: Sequence[int], rng: random.Random, gap_s: tuple[float, float]
                 ) -> None:
        for i, node_id in enumerate(node_ids):
            if i:
                time.sleep(rng.uniform(*gap_s))
            if self.cluster.node_state(node_id) == "dead":
                self.cluster.start_node(node_id)

    def heal_all(self) -> None:
        """Undo everything: links healed, paused nodes continued, dead nodes restarted."""
        self.lab.heal()
        for node_id in [*self.controllers, *self.brokers]:
            state = self.cluster.node_state(node_id)
            if state == "stopped":
                self.cluster.signal(node_id, signal.SIGCONT)
            elif state == "dead":
                self.cluster.start_node(node_id)

    # -- one fault ----------------------------------------------------------------------------
    def run(self, fault: Fault) -> dict[str, Any]:
        rng = random.Random(fault.params.get("pick", 0))
        record: dict[str, Any] = {"name": fault.name, "start": time.time(),
                                  "planned_s": round(fault.duration_s, 3)}
        action = getattr(self, "_" + fault.name.replace("-", "_"))
        try:
            power_cut = self.power_loss and fault.name in BROKER_KILLS
            if power_cut and self.eligible_leader_replicas:
                sole = self._wait_for_holders()
                if sole:
                    record["skipped"] = (f"the committed records of {', '.join(sole)} are on one "
                                         "broker only (ISR and ELR, without brokers power-cut "
                                         "and not caught up since): a power cut now is a second "
                                         "failure of their holders, outside SPEC §4's premise")
                else:
                    record["isr_whole"] = self.observer.all_in_sync(self.sync_keys)
                    action(fault.duration_s, rng, record)
                    self.power_cut.update(t for t in record.get("targets", [])
                                          if t in self.brokers)
            elif power_cut and not self._wait_in_sync():
                record["skipped"] = ("a replica is out of the ISR and eligible leader replicas "
                                     "(KIP-966) are off: a power cut now is outside SPEC §4's "
                                     "premise")
            else:
                action(fault.duration_s, rng, record)
        finally:
            record["end"] = time.time()
        self.say(f"fault {fault.name} {record.get('targets', '')} "
                 f"{record['end'] - record['start']:.1f}s")
        return record

    def _wait_for_holders(self) -> list[str]:
        """With ELR: wait (at most ``in_sync_wait_s``) until every partition's committed
        records are on two holders that were not power-cut since they last caught up; the
        partitions still short of that, [] when none."""
        deadline = time.monotonic() + self.in_sync_wait_s
        while True:
            self.power_cut = {b for b in self.power_cut
                              if not self.observer.caught_up(b, self.sync_keys)}
            sole = self.observer.sole_holders(self.sync_keys, self.power_cut)
            if not sole or time.monotonic() >= deadline:
                return sole
            time.sleep(0.2)

    def _wait_in_sync(self) -> bool:
        deadline = time.monotonic() + self.in_sync_wait_s
        while not self.observer.all_in_sync(self.sync_keys):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    def _isolate(self, node_id: int, duration_s: float, record: dict[str, Any]) -> None:
        host = host_of(node_id)
        record["targets"] = [node_id]
        self.lab.isolate(host, self._others([node_id]))
        time.sleep(duration_s)
        self.lab.heal(host)

    def _isolate_leader(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                        ) -> None:
        key, leader = self._leader(rng)
        record["partition"] = key
        self._isolate(leader, duration_s, record)

    def _isolate_one(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                     ) -> None:
        self._isolate(self.brokers[rng.randrange(len(self.brokers))], duration_s, record)

    def _active_controller(self) -> int:
        """The active controller's node id (of a quorum: its leader), else the first."""
        for node_id in self.controllers:
            if self.observer.active == self.cluster.address(node_id):
                return node_id
        return self.controllers[0]

    def _isolate_controller(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                            ) -> None:
        self._isolate(self._active_controller(), duration_s, record)

    def _sides(self, rng: random.Random, bridge: bool) -> tuple[list[int], list[int], int | None]:
        nodes = [*self.controllers, *self.brokers]
        rng.shuffle(nodes)
        if bridge:
            mid = len(nodes) // 2
            return nodes[:mid], nodes[mid + 1:], nodes[mid]
        k = rng.randint(1, len(nodes) // 2)
        return nodes[:k], nodes[k:], None

    def _split(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        a, b, _ = self._sides(rng, bridge=False)
        record["targets"] = [a, b]
        self.lab.split([host_of(n) for n in a], [host_of(n) for n in b])
        time.sleep(duration_s)
        self.lab.heal()

    def _bridge(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        a, b, middle = self._sides(rng, bridge=True)
        record["targets"] = [a, b]
        record["bridge"] = middle
        self.lab.split([host_of(n) for n in a], [host_of(n) for n in b])
        time.sleep(duration_s)
        self.lab.heal()

    def _flap(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        node_id = self.brokers[rng.randrange(len(self.brokers))]
        host = host_of(node_id)
        record["targets"] = [node_id]
        end = time.monotonic() + duration_s
        flips = 0
        while time.monotonic() < end:
            self.lab.isolate(host, self._others([node_id]))
            time.sleep(min(rng.uniform(0.3, 1.5), max(0.0, end - time.monotonic())))
            self.lab.heal(host)
            flips += 1
            time.sleep(min(rng.uniform(0.3, 1.5), max(0.0, end - time.monotonic())))
        record["flips"] = flips

    def _pause(self, node_id: int, duration_s: float, record: dict[str, Any]) -> None:
        record["targets"] = [node_id]
        self.cluster.signal(node_id, signal.SIGSTOP)
        time.sleep(duration_s)
        self.cluster.signal(node_id, signal.SIGCONT)

    def _pause_one(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        self._pause(self.brokers[rng.randrange(len(self.brokers))], duration_s, record)

    def _pause_leader(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                      ) -> None:
        key, leader = self._leader(rng)
        record["partition"] = key
        self._pause(leader, duration_s, record)

    def _pause_controller(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                          ) -> None:
        self._pause(self._active_controller(), duration_s, record)

    def _kill(self, node_ids: Sequence[int], duration_s: float, rng: random.Random,
              record: dict[str, Any]) -> None:
        record["targets"] = list(node_ids)
        for node_id in node_ids:
            self.cluster.kill(node_id, signal.SIGKILL)
        time.sleep(duration_s)
        self._restart(node_ids, rng, (1.0, 3.0))

    def _kill_one(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        self._kill([self.brokers[rng.randrange(len(self.brokers))]], duration_s, rng, record)

    def _kill_leader(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                     ) -> None:
        key, leader = self._leader(rng)
        record["partition"] = key
        self._kill([leader], duration_s, rng, record)

    def _kill_majority(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                       ) -> None:
        victims = rng.sample(self.brokers, len(self.brokers) // 2 + 1)
        self._kill(victims, duration_s, rng, record)

    def _kill_all(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        victims = list(self.brokers)
        rng.shuffle(victims)
        self._kill(victims, duration_s, rng, record)

    def _power_loss(self, duration_s: float, rng: random.Random, record: dict[str, Any]) -> None:
        """The brokers run with their own page cache (floodmark.unsafe.power.loss.page.cache):
        SIGKILL drops every write not yet fsynced, as a power cut would."""
        self._kill([self.brokers[rng.randrange(len(self.brokers))]], duration_s, rng, record)

    def _pause_then_power_cut(self, duration_s: float, rng: random.Random,
                              record: dict[str, Any]) -> None:
        """Issue 13's finding 5: a partition's followers paused until its ISR is the leader
        alone (bounded; the controller fences them after its session), the leader's power cut
        and restarted, then the followers continued. With eligible leader replicas a follower
        leads once it is back, holding every committed record; without them the power-cut
        broker is elected again from what it fsynced and the followers truncate to it."""
        key, leader = self._leader(rng)
        reg = self.observer.view(key) or {"replicas": self.brokers}
        followers = [b for b in reg["replicas"] if b != leader and b in self.brokers]
        record["partition"] = key
        record["targets"] = [leader]
        record["paused"] = followers
        for node_id in followers:
            self.cluster.signal(node_id, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + duration_s + 10.0
            while time.monotonic() < deadline:
                now = self.observer.view(key)
                if now is not None and now["isr"] == [leader]:
                    break
                time.sleep(0.1)
            now = self.observer.view(key) or {}
            record["isr_at_cut"] = now.get("isr")
            record["elr_at_cut"] = now.get("elr")
            self.cluster.kill(leader, signal.SIGKILL)
            time.sleep(rng.uniform(0.5, 1.5))
            self._restart([leader], rng, (0.0, 0.0))
            time.sleep(rng.uniform(1.0, 3.0))
        finally:
            for node_id in followers:
                self.cluster.signal(node_id, signal.SIGCONT)

    def _kill_controller(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                         ) -> None:
        self._kill([self._active_controller()], duration_s, rng, record)

    def _kill_controllers(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                          ) -> None:
        """Every controller at once (the whole quorum), restarted one by one."""
        victims = list(self.controllers)
        rng.shuffle(victims)
        self._kill(victims, duration_s, rng, record)

    def _isolate_then_kill(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                           ) -> None:
        """Seed 002's unclean election: a follower falls out of the ISR (cut off), every ISR
        member dies, the follower comes back; the others return later."""
        key, leader = self._leader(rng)
        reg = self.observer.view(key) or {"replicas": self.brokers}
        followers = [b for b in reg["replicas"] if b != leader and b in self.brokers]
        lagging = followers[rng.randrange(len(followers))] if followers else leader
        host = host_of(lagging)
        record["partition"] = key
        record["lagging"] = lagging
        self.lab.isolate(host, self._others([lagging]))
        deadline = time.monotonic() + duration_s + 10.0
        time.sleep(duration_s / 2)
        while time.monotonic() < deadline:
            now = self.observer.view(key)
            if now is not None and lagging not in now["isr"]:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # the ISR member(s) acknowledge a few more writes alone
        victims = [b for b in self.brokers if b != lagging]
        record["targets"] = victims
        for node_id in victims:
            self.cluster.kill(node_id, signal.SIGKILL)
        self.lab.heal(host)
        time.sleep(duration_s)
        self._restart(victims, rng, (1.0, 3.0))

    def _wait_leader(self, key: str, not_in: Sequence[int], timeout_s: float) -> int:
        """The partition's leader once it is none of ``not_in`` (-1 when time runs out)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reg = self.observer.view(key)
            if reg is not None and reg["leader"] >= 0 and reg["leader"] not in not_in:
                return int(reg["leader"])
            time.sleep(0.1)
        return -1

    def _failover_twice(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                        ) -> None:
        """Seeds 000/001 on a real cluster: the two followers cannot reach each other; the
        leader dies, one follower takes over, the other becomes its follower (under the
        pre-0.11 rule it cuts its log to its own high watermark, which is one fetch behind) and
        cannot fetch from it; the new leader dies too, before the ISR shrinks, and the last
        replica is elected with whatever its log holds. Both dead brokers return later."""
        key, leader = self._leader(rng)
        reg = self.observer.view(key) or {"replicas": self.brokers}
        followers = [b for b in reg["replicas"] if b != leader and b in self.brokers]
        record["partition"] = key
        if len(followers) < 2:
            self._kill([leader], duration_s, rng, record)
            return
        a, b = followers[:2]
        self.lab.isolate(host_of(a), [host_of(b)])
        time.sleep(0.5)
        self.cluster.kill(leader, signal.SIGKILL)
        successor = self._wait_leader(key, [leader], 8.0)
        victims = [leader]
        if successor >= 0:
            time.sleep(0.3)
            self.cluster.kill(successor, signal.SIGKILL)
            victims.append(successor)
            self._wait_leader(key, victims, 8.0)
        record["targets"] = victims
        time.sleep(duration_s / 2)
        self.lab.heal(host_of(a))
        time.sleep(duration_s / 2)
        self._restart(victims, rng, (1.0, 3.0))

    # -- clean restarts -----------------------------------------------------------------------
    def _terminate(self, node_id: int, record: dict[str, Any]) -> None:
        """SIGTERM (a controlled shutdown) and wait, on its progress, until it is gone; one
        that stops making progress on its way out is SIGKILLed (and recorded)."""
        self.cluster.kill(node_id, signal.SIGTERM)
        if self.cluster.node_state(node_id) != "dead":
            record.setdefault("sigkilled_after_sigterm", []).append(node_id)
            self.cluster.kill(node_id, signal.SIGKILL)

    def _await_caught_up(self, node_id: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.observer.caught_up(node_id, self.sync_keys):
                return True
            time.sleep(0.2)
        return False

    def _restart_clean(self, node_ids: Sequence[int], duration_s: float, rng: random.Random,
                       record: dict[str, Any]) -> None:
        """Each broker in turn: SIGTERM, down a moment, started again, then (bounded) back in
        the ISR of every partition it holds before the next one goes."""
        record["targets"] = list(node_ids)
        record["signal"] = "SIGTERM"
        down_s = (0.5, 2.0) if len(node_ids) > 1 else (duration_s / 3, duration_s / 2)
        caught_up = []
        for node_id in node_ids:
            self._terminate(node_id, record)
            time.sleep(rng.uniform(*down_s))
            self._restart([node_id], rng, (0.0, 0.0))
            caught_up.append(self._await_caught_up(node_id, CATCH_UP_S))
        record["caught_up"] = caught_up

    def _restart_one(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                     ) -> None:
        self._restart_clean([self.brokers[rng.randrange(len(self.brokers))]], duration_s, rng,
                            record)

    def _restart_leader(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                        ) -> None:
        key, leader = self._leader(rng)
        record["partition"] = key
        self._restart_clean([leader], duration_s, rng, record)

    def rolling_restart(self, rng: random.Random) -> dict[str, Any]:
        """Every broker in turn (SIGTERM, a moment down, started, back in its ISRs): the
        ``restart-all`` fault, outside the schedule (before the final read)."""
        return self.run(Fault("restart-all", 0.0, 1.0, {"pick": rng.randrange(1 << 30)}))

    def _restart_all(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                     ) -> None:
        """A rolling restart: afterwards every replica, leaders included, runs on what it
        rebuilt from its files at start."""
        order = list(self.brokers)
        rng.shuffle(order)
        self._restart_clean(order, duration_s, rng, record)

    # -- the transaction coordinator ------------------------------------------------------------
    def _txn_coordinator(self, rng: random.Random, record: dict[str, Any]) -> int:
        return self._coordinator(self.txn_coordinators, TXN_STATE_KEY, rng, record)

    def _coordinator(self, ask: Callable[[], Sequence[int]] | None, state_key: str,
                     rng: random.Random, record: dict[str, Any]) -> int:
        """The broker coordinating the workload's transactional ids or group, as
        FindCoordinator names it (``ask``); else the leader of ``state_key`` (the coordinator
        state partition) as the controller last said; else any broker (``coordinator_from``
        says which)."""
        if ask is not None:
            try:
                named = [b for b in ask() if b in self.brokers]
            except Exception as exc:  # no broker answered: the fallbacks below
                record["find_coordinator_error"] = str(exc)[:200]
                named = []
            if named:
                record["coordinator_from"] = "find-coordinator"
                record["coordinators"] = sorted(set(named))
                return named[rng.randrange(len(named))]
        reg = self.observer.view(state_key)
        if reg is not None and reg["leader"] in self.brokers:
            record["coordinator_from"] = "metadata"
            return int(reg["leader"])
        record["coordinator_from"] = "random"
        return self.brokers[rng.randrange(len(self.brokers))]

    def _kill_txn_coordinator(self, duration_s: float, rng: random.Random,
                              record: dict[str, Any]) -> None:
        self._kill([self._txn_coordinator(rng, record)], duration_s, rng, record)

    def _restart_txn_coordinator(self, duration_s: float, rng: random.Random,
                                 record: dict[str, Any]) -> None:
        self._restart_clean([self._txn_coordinator(rng, record)], duration_s, rng, record)

    def _pause_txn_coordinator(self, duration_s: float, rng: random.Random,
                               record: dict[str, Any]) -> None:
        self._pause(self._txn_coordinator(rng, record), duration_s, record)

    def _isolate_txn_coordinator(self, duration_s: float, rng: random.Random,
                                 record: dict[str, Any]) -> None:
        self._isolate(self._txn_coordinator(rng, record), duration_s, record)

    # -- the consumer group ---------------------------------------------------------------------
    def _group_coordinator(self, rng: random.Random, record: dict[str, Any]) -> int:
        return self._coordinator(self.group_coordinators, OFFSETS_KEY, rng, record)

    def _kill_group_coordinator(self, duration_s: float, rng: random.Random,
                                record: dict[str, Any]) -> None:
        self._kill([self._group_coordinator(rng, record)], duration_s, rng, record)

    def _restart_group_coordinator(self, duration_s: float, rng: random.Random,
                                   record: dict[str, Any]) -> None:
        self._restart_clean([self._group_coordinator(rng, record)], duration_s, rng, record)

    def _pause_group_coordinator(self, duration_s: float, rng: random.Random,
                                 record: dict[str, Any]) -> None:
        self._pause(self._group_coordinator(rng, record), duration_s, record)

    def _isolate_group_coordinator(self, duration_s: float, rng: random.Random,
                                   record: dict[str, Any]) -> None:
        self._isolate(self._group_coordinator(rng, record), duration_s, record)

    def _failover_rebalance(self, duration_s: float, rng: random.Random,
                            record: dict[str, Any]) -> None:
        """Issue 22: a rebalance across a coordinator failover. The group coordinator is
        SIGKILLed; a third of the way into the fault a member leaves and a new one joins, so
        the coordinator elected next loads the group and runs the rebalance; the old one
        returns at the end."""
        if self.members is None:
            raise RuntimeError("the group faults need the consumer-group workload's members")
        coordinator = self._group_coordinator(rng, record)
        record["targets"] = [coordinator]
        self.cluster.kill(coordinator, signal.SIGKILL)
        time.sleep(duration_s / 3)
        leaving = self._member(rng, record)
        if leaving is not None:
            record["left"] = [leaving]
            self.members.leave(leaving)
        record["joined"] = [self.members.join()]
        time.sleep(duration_s * 2 / 3)
        self._restart([coordinator], rng, (0.0, 0.0))

    def _member(self, rng: random.Random, record: dict[str, Any]) -> str | None:
        if self.members is None:
            raise RuntimeError("the group faults need the consumer-group workload's members")
        alive = sorted(self.members.running())
        if not alive:
            record["skipped"] = "no member is running"
            return None
        return alive[rng.randrange(len(alive))]

    def _member_leave(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                      ) -> None:
        """A member closes (revoke, LeaveGroup: the group rebalances at once); a new member
        joins after the fault's duration (a second rebalance)."""
        target = self._member(rng, record)
        if target is None or self.members is None:
            return
        record["targets"] = [target]
        self.members.leave(target)
        time.sleep(duration_s)
        record["joined"] = [self.members.join()]

    def _member_kill(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                     ) -> None:
        """A member SIGKILLed: its partitions are idle until its session times out; a new
        member joins after the fault's duration."""
        target = self._member(rng, record)
        if target is None or self.members is None:
            return
        record["targets"] = [target]
        self.members.kill(target)
        time.sleep(duration_s)
        record["joined"] = [self.members.join()]

    def _member_join(self, duration_s: float, rng: random.Random, record: dict[str, Any]
                     ) -> None:
        """An extra member for the fault's duration, then it leaves."""
        if self.members is None:
            raise RuntimeError("the group faults need the consumer-group workload's members")
        extra = self.members.join()
        record["joined"] = [extra]
        time.sleep(duration_s)
        record["targets"] = [extra]
        self.members.leave(extra)
