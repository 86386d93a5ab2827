"""With the brokers' power-loss page cache every broker kill is a power cut. Without eligible
leader replicas SPEC §4's premise allows one only while no other replica has failed (a replica
out of the ISR lacks what the ISR acknowledged), so the nemesis waits, bounded, until every
partition's ISR is whole, and skips the kill otherwise. With them (KIP-966, the default) the cut
goes ahead: tests/cluster/test_power_loss_last_isr_member.py shows the writes survive it.

Found by an all-faults run (seed 4): a bridge fault left chaos-a-0's ISR at [3]; the next fault,
0 ms later, power-cut broker 3; it came back with an empty log, was elected again as the only ISR
member, and brokers 1 and 2 truncated to it: every acknowledged write was lost (12,791).
Pure logic of the gate, with stand-ins for the cluster and the controller's view."""

from __future__ import annotations

import signal
from typing import Any

from floodmark.chaos.nemesis import Nemesis
from floodmark.chaos.schedule import Fault


class Cluster:
    broker_ids = (1, 2, 3)
    controller_ids = (0,)

    def __init__(self) -> None:
        self.killed: list[int] = []
        self.started: list[int] = []

    def kill(self, node_id: int, sig: signal.Signals) -> None:
        self.killed.append(node_id)

    def node_state(self, node_id: int) -> str:
        return "dead" if node_id in self.killed and node_id not in self.started else "running"

    def start_node(self, node_id: int) -> None:
        self.started.append(node_id)


class Observer:
    """The controller's view: the ISR is whole only from the ``whole_after``-th look on."""

    def __init__(self, whole_after: int | None, held_after: int | None = 0) -> None:
        self.whole_after = whole_after
        self.held_after = held_after  # looks until two holders (ISR or ELR) per partition
        self.looks = 0
        self.holder_looks = 0
        self.cut_seen: list[set[int]] = []
        self.active: str | None = None

    def sole_holders(self, keys: Any, cut: Any) -> list[str]:
        self.holder_looks += 1
        self.cut_seen.append(set(cut))
        held = self.held_after is not None and self.holder_looks > self.held_after
        return [] if held else ["t-0"]

    def caught_up(self, broker_id: int, keys: Any) -> bool:
        return False

    def all_in_sync(self, keys: Any) -> bool:
        self.looks += 1
        return self.whole_after is not None and self.looks > self.whole_after

    def view(self, key: str) -> dict[str, Any]:
        return {"leader": 3, "isr": [3], "replicas": [1, 2, 3]}


def _nemesis(observer: Observer, cluster: Cluster, power_loss: bool, elr: bool = False
             ) -> Nemesis:
    return Nemesis(None, cluster, observer, ["t-0"], power_loss=power_loss,  # type: ignore[arg-type]
                   in_sync_wait_s=0.5, eligible_leader_replicas=elr)


def test_a_power_cut_while_a_replica_is_out_of_the_isr_is_skipped() -> None:
    cluster = Cluster()
    record = _nemesis(Observer(None), cluster, True).run(Fault("kill-leader", 0, 0.01, {"pick": 1}))
    assert cluster.killed == [] and "eligible leader replicas" in record["skipped"]


def test_with_eligible_leader_replicas_a_power_cut_does_not_wait_for_whole_isrs() -> None:
    cluster, observer = Cluster(), Observer(None)
    record = _nemesis(observer, cluster, True, elr=True).run(
        Fault("kill-leader", 0, 0.01, {"pick": 1}))
    assert cluster.killed == [3] and "skipped" not in record and observer.looks == 1
    assert record["isr_whole"] is False and cluster.started == [3]


def test_with_eligible_leader_replicas_a_second_cut_of_the_holders_waits() -> None:
    """All-faults seed 4 with ELR: leader 1 was cut (ISR [1], ELR [3]), 3 was elected with ISR
    [3], and 0.3 s later a kill-leader cut 3 too: its records were only in its page cache. A
    power cut waits while some partition's records are on one holder (ISR and ELR, without
    brokers cut and not caught up since), and is skipped if that lasts."""
    cluster, observer = Cluster(), Observer(None, held_after=2)
    nemesis = _nemesis(observer, cluster, True, elr=True)
    record = nemesis.run(Fault("power-loss", 0, 0.01, {"pick": 1}))
    assert "skipped" not in record and observer.holder_looks == 3 and len(cluster.killed) == 1
    assert nemesis.power_cut == set(cluster.killed)  # not caught up yet: counted out next time
    stuck = Observer(None, held_after=None)
    nemesis.observer = stuck  # type: ignore[assignment]
    record = nemesis.run(Fault("kill-leader", 0, 0.01, {"pick": 1}))
    assert "on one broker only" in record["skipped"] and len(cluster.killed) == 1
    assert stuck.cut_seen[-1] == set(cluster.killed)


def test_a_power_cut_waits_until_the_isr_is_whole() -> None:
    cluster, observer = Cluster(), Observer(whole_after=2)
    record = _nemesis(observer, cluster, True).run(Fault("power-loss", 0, 0.01, {"pick": 1}))
    assert "skipped" not in record and len(cluster.killed) == 1 and observer.looks == 3
    assert cluster.started == cluster.killed  # and it comes back


def test_without_power_loss_a_kill_does_not_wait() -> None:
    cluster, observer = Cluster(), Observer(None)
    record = _nemesis(observer, cluster, False).run(Fault("kill-leader", 0, 0.01, {"pick": 1}))
    assert cluster.killed == [3] and "skipped" not in record and observer.looks == 0
