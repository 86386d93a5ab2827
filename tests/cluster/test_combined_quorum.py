"""Combined mode as a controller-quorum voter (issue 11, "combined mode keeps working"), real
processes: three ``process.roles=broker,controller`` nodes form the quorum and are the brokers;
RF=3, min.insync.replicas=2, an idempotent acks=all confluent-kafka producer writes throughout.

SIGKILL the node that is both the active controller and the partition's leader: the two
survivors elect a new active controller, the partition gets a new leader, a CreateTopics
succeeds; the killed node restarts and rejoins as a voter (caught up with the leader's HW) and
as a follower in the ISR. Every acknowledged write is read back once at its offset. Each step
waits on progress (an active controller, a new leader, more acknowledgements), never a sleep.

The CLI test drives the same through ``floodmark cluster up --combined``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import (
    FAST_QUORUM_SETTINGS,
    AckLog,
    acked_more,
    consumer_thread,
    one_line_error,
    producer_thread,
    verify_after_healing,
    voter_caught_up,
    wait_until,
)
from tests.cluster.helpers import cli_ok as _ok
from tests.cluster.helpers import run_cli as _cli

pytestmark = pytest.mark.integration

TOPIC = "combined"
SETTINGS = {**FAST_QUORUM_SETTINGS,
            # The restarted node must come back as a follower: no preferred-leader moves.
            "auto.leader.rebalance.enable": "false"}
STEP_S = 60.0  # any one step stalling this long fails the test


def _create(bootstrap: str, name: str, assignment: list[int] | None = None,
            replication_factor: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"min.insync.replicas": "2"}
    topic = (NewTopic(name, 1, replica_assignment=[assignment], config=configs) if assignment
             else NewTopic(name, 1, replication_factor, config=configs))
    admin.create_topics([topic], request_timeout=30)[name].result(60)


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).topics)


def _leader(cluster: LocalCluster) -> int | None:
    leader = cluster.leader_of(TOPIC)
    return leader if leader > 0 else None


def _voter_back(cluster: LocalCluster, voter: int) -> bool:
    """The voter follows another leader, holds everything it committed, and says follower."""
    mine = cluster.quorum()["controllers"].get(str(voter))
    return (mine is not None and mine["role"] == "follower"
            and voter_caught_up(cluster, voter))


def test_combined_voters_survive_losing_the_active_controller_and_leader(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "combined-q", 3, {"replica.lag.time.max.ms": "2000"},
                           SETTINGS, metrics=False, combined=True)
    cluster.start()
    stop = threading.Event()
    acks = AckLog()
    seen: dict[int, bytes] = {}
    producer = consumer = None
    try:
        assert cluster.controller_ids == cluster.broker_ids == [1, 2, 3]
        nodes = cluster.status()["nodes"]
        assert {n["role"] for n in nodes} == {"broker,controller"}
        assert len({n["pid"] for n in nodes}) == 3  # three processes, each both roles
        # The partition's preferred leader is the active controller: one SIGKILL takes both.
        active = cluster.wait_active_controller(STEP_S)
        _create(cluster.bootstrap, TOPIC, [active, *(b for b in cluster.broker_ids
                                                     if b != active)])
        wait_until(lambda: _leader(cluster) == active, STEP_S, f"node {active} leading")
        wait_until(lambda: all(n.get("fenced") is False for n in cluster.status()["nodes"]),
                   STEP_S, "every broker registered and unfenced")
        producer = producer_thread(cluster.bootstrap, TOPIC, acks, stop)
        consumer = consumer_thread(cluster.bootstrap, TOPIC, seen, stop)
        acked_more(acks, 0, 300)

        victim = cluster.wait_active_controller(STEP_S)
        assert victim == _leader(cluster) == active, "the active controller leads the partition"
        epoch = cluster.quorum()["leader_epoch"]
        before = acks.count()
        cluster.kill(victim, signal.SIGKILL)

        new_active = cluster.wait_active_controller(STEP_S, besides=victim)
        assert cluster.quorum()["leader_epoch"] > epoch
        wait_until(lambda: _leader(cluster) not in (None, victim), STEP_S,
                   "a new partition leader")
        acked_more(acks, before)
        # CreateTopics through the new active controller (two live brokers: RF=2).
        _create(cluster.bootstrap, "after-kill", replication_factor=2)
        wait_until(lambda: "after-kill" in _topics(cluster.bootstrap), STEP_S,
                   "the new topic listed")
        status = {n["id"]: n for n in cluster.status()["nodes"]}
        assert status[victim]["state"] == "dead" and status[new_active]["active"] is True

        before = acks.count()
        cluster.start_node(victim)
        wait_until(lambda: _voter_back(cluster, victim), STEP_S,
                   f"node {victim} back as a caught-up follower voter")
        wait_until(lambda: sorted((cluster.partition_registration(TOPIC) or {}).get("isr", []))
                   == [1, 2, 3], STEP_S, f"node {victim} back in the ISR")
        reg = cluster.partition_registration(TOPIC) or {}
        assert reg["leader"] != victim, "the restarted node is a follower"
        acked_more(acks, before)

        stop.set()
        producer.join(150)
        consumer.join(30)
        assert not producer.is_alive()
        verify_after_healing(cluster, TOPIC, acks, seen)
        assert {TOPIC, "after-kill"} <= _topics(cluster.bootstrap)
        for log in (cluster.data_dir / "logs").glob("broker-*.log"):
            text = log.read_text(errors="replace")
            assert "metadata gap" not in text and "applying metadata failed" not in text, log
    finally:
        stop.set()
        cluster.stop()


def _nodes(dd: list[str]) -> dict[int, dict[str, Any]]:
    return {n["id"]: n for n in json.loads(_ok("cluster", "status", "--json", *dd))["nodes"]}


def _active(dd: list[str], besides: int | None = None) -> int:
    def one() -> tuple[int] | None:
        active = [i for i, n in _nodes(dd).items() if n.get("active")]
        assert len(active) <= 1, active
        return (active[0],) if active and active[0] != besides else None
    return int(wait_until(one, STEP_S, "an active controller")[0])


def test_cluster_up_combined(tmp_path: Path) -> None:
    dd = ["--data-dir", str(tmp_path / "combined-cli")]
    quick = [arg for name in ("controller.quorum.election.timeout.ms",
                              "controller.quorum.fetch.timeout.ms", "broker.session.timeout.ms")
             for arg in ("--controller-set", f"{name}={SETTINGS[name]}")]
    for bad in (["--controllers", "3"], ["--controller", "127.0.0.1:9"]):
        one_line_error(_cli("cluster", "up", "--combined", *bad, "--data-dir",
                            str(tmp_path / "no")), "--combined")
    up = _ok("cluster", "up", "--detach", "--combined", *quick, *dd)
    try:
        assert "bootstrap: " in up
        nodes = _nodes(dd)
        assert sorted(nodes) == [1, 2, 3]  # no controller process: no node 0
        for n in nodes.values():  # every key status had, plus active and the voter address
            assert {"id", "role", "pid", "address", "alive", "state", "active",
                    "controller_address", "fenced", "broker_epoch"} <= set(n), n
            assert n["role"] == "broker,controller" and n["alive"]
        active = _active(dd)
        q = json.loads(_ok("cluster", "quorum", "--json", *dd))
        assert q["leader_id"] == active
        assert sorted(v["voter_id"] for v in q["voters"]) == [1, 2, 3]
        bootstrap = json.loads(_ok("cluster", "status", "--json", *dd))["bootstrap"]

        epoch = nodes[active]["broker_epoch"]
        _ok("cluster", "kill", str(active), *dd)
        new = _active(dd, besides=active)
        _ok("topic", "create", "after-cli-kill", "--replication-factor", "2",
            "--bootstrap-server", bootstrap)
        _ok("cluster", "start", str(active), *dd)
        wait_until(lambda: (n := _nodes(dd)[active])["broker_epoch"] > epoch
                   and n["fenced"] is False and n["state"] == "running", STEP_S,
                   f"node {active} registered again")
        assert _active(dd) == new

        # The directory keeps its shape; up again starts the same three voters and their data.
        _ok("cluster", "down", *dd)
        one_line_error(_cli("cluster", "up", "--detach", "--controllers", "3", *dd), "combined")
        again = _ok("cluster", "up", "--detach", "--combined", *dd)
        assert again.count("controller (combined with broker) ") == 3
        _active(dd)
        listed = _ok("topic", "list", "--bootstrap-server", bootstrap).split()
        assert "after-cli-kill" in listed
    finally:
        _cli("cluster", "down", *dd)


# A session long enough that a fence before it can only come from the port probe.
LONG_SESSION = {**SETTINGS, "broker.session.timeout.ms": "20000"}
EARLY_S = 10.0  # "well before the session timeout"
STOPPED_SESSION_MS = 8000  # the stopped broker's test: long beside the probe's moment


def _fenced(cluster: LocalCluster, node: int) -> bool:
    return any(n["id"] == node and n.get("fenced") is True for n in cluster.status()["nodes"])


def test_new_active_controller_fences_the_killed_combined_node_early(tmp_path: Path) -> None:
    """The killed node was the active controller: its broker's connections went to itself, so
    the new active controller saw none close. Just after activation it asks the port of every
    unfenced broker holding no connection to it; the dead node's refuses, so it is fenced (and
    the partition gets a new leader) long before its 20 s session ends."""
    cluster = LocalCluster(tmp_path / "combined-probeactive", 3,
                           {"replica.lag.time.max.ms": "2000"}, LONG_SESSION, metrics=False,
                           combined=True)
    cluster.start()
    try:
        active = cluster.wait_active_controller(STEP_S)
        _create(cluster.bootstrap, TOPIC, [active, *(b for b in cluster.broker_ids
                                                     if b != active)])
        wait_until(lambda: _leader(cluster) == active, STEP_S, f"node {active} leading")
        wait_until(lambda: all(n.get("fenced") is False for n in cluster.status()["nodes"]),
                   STEP_S, "every broker registered and unfenced")
        killed_at = time.monotonic()
        cluster.kill(active, signal.SIGKILL)
        cluster.wait_active_controller(STEP_S, besides=active)
        wait_until(lambda: _fenced(cluster, active), STEP_S, f"node {active} fenced")
        fenced_s = time.monotonic() - killed_at
        wait_until(lambda: _leader(cluster) not in (None, active), STEP_S,
                   "a new partition leader")
        assert fenced_s < EARLY_S, f"fenced {fenced_s:.1f} s after the kill (session 20 s)"
        assert not any(_fenced(cluster, b) for b in cluster.broker_ids if b != active)
    finally:
        cluster.stop()


def test_new_active_controller_leaves_a_stopped_broker_to_its_session(tmp_path: Path) -> None:
    """Controllers of their own: a broker is SIGSTOPped, then the active controller is
    SIGKILLed. The new one finds the stopped broker holding no connection to it, but its port
    still accepts (the kernel completes the handshake): it is fenced only when its session
    (8 s here) ends, never early (the probe of an early fence comes just after activation)."""
    cluster = LocalCluster(tmp_path / "separate-probeactive", 3, None,
                           {**SETTINGS, "broker.session.timeout.ms": str(STOPPED_SESSION_MS)},
                           metrics=False, controllers=3)
    cluster.start()
    stopped = cluster.broker_ids[1]
    try:
        wait_until(lambda: all(n.get("fenced") is False for n in cluster.status()["nodes"]
                               if n["id"] in cluster.broker_ids),
                   STEP_S, "every broker registered and unfenced")
        active = cluster.wait_active_controller(STEP_S)
        cluster.kill(stopped, signal.SIGSTOP)
        stopped_at = time.monotonic()
        cluster.kill(active, signal.SIGKILL)
        cluster.wait_active_controller(STEP_S, besides=active)
        activated_at = time.monotonic()
        session_s = STOPPED_SESSION_MS / 1000
        wait_until(lambda: _fenced(cluster, stopped), session_s + STEP_S,
                   f"stopped broker {stopped} fenced at its session timeout")
        fenced_at = time.monotonic()
        assert fenced_at - activated_at >= session_s - 1, (
            f"fenced {fenced_at - activated_at:.1f} s after a new controller became active "
            f"({fenced_at - stopped_at:.1f} s after SIGSTOP); its session is {session_s:g} s")
        assert not any(_fenced(cluster, b) for b in cluster.broker_ids if b != stopped)
    finally:
        pid = cluster.pid(stopped)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        cluster.stop()
