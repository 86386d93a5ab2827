"""``floodmark cluster up|status|kill|start|down`` as a user runs them, and a controller restart:
the metadata log brings back every topic, broker epoch and leader, and the brokers keep serving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodmark.client.connection import KafkaConnection
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=str(REPO))


def _status(data_dir: Path) -> dict:
    out = _cli("cluster", "status", "--json", "--data-dir", str(data_dir))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _produce(data_dir: Path, topic: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """`floodmark produce` talks to the broker it is given: give it the partition leader (and
    ask again if leadership moved meanwhile, e.g. a preferred-leader election)."""
    out: subprocess.CompletedProcess[str] | None = None
    for _ in range(5):
        st = _status(data_dir)
        leader = st["partitions"][topic]["0"]["leader"]
        bootstrap = next(n["address"] for n in st["nodes"] if n["id"] == leader)
        out = subprocess.run([sys.executable, "-m", "floodmark.cli", "produce", topic, "--acks",
                              "all", "--bootstrap-server", bootstrap],
                             input="\n".join(lines) + "\n", capture_output=True, text=True,
                             timeout=60, cwd=str(REPO))
        if out.returncode == 0:
            break
        time.sleep(1.0)
    assert out is not None
    return out


def test_cluster_up_status_kill_start_down(tmp_path: Path) -> None:
    data = tmp_path / "cl"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    up = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "cluster", "up", "--brokers",
                           "3", "--data-dir", str(data), "--controller-set",
                           "broker.session.timeout.ms=1500"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          cwd=str(REPO))
    try:
        assert up.stdout is not None
        bootstrap = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not bootstrap:
            line = up.stdout.readline()
            if line.startswith("bootstrap: "):
                bootstrap = line.split()[1]
        assert bootstrap.count(",") == 2
        st = _status(data)
        assert st["bootstrap"] == bootstrap
        roles = {n["id"]: (n["role"], n["alive"]) for n in st["nodes"]}
        assert roles == {0: ("controller", True), 1: ("broker", True), 2: ("broker", True),
                         3: ("broker", True)}
        assert all(isinstance(n["pid"], int) and n["address"].startswith("127.0.0.1:")
                   for n in st["nodes"])

        created = _cli("topic", "create", "cli-t", "--replication-factor", "3", "--config",
                       "min.insync.replicas=2", "--bootstrap-server", bootstrap)
        assert created.returncode == 0, created.stderr
        assert _produce(data, "cli-t", [f"x{i}" for i in range(100)]).returncode == 0

        # Kill broker 2 with SIGKILL: status shows it dead; the controller fences it.
        out = _cli("cluster", "kill", "2", "--signal", "KILL", "--data-dir", str(data))
        assert out.returncode == 0, out.stderr
        wait_until(lambda: not next(n for n in _status(data)["nodes"] if n["id"] == 2)["alive"],
                   10, "broker 2 dead")
        wait_until(lambda: next(n for n in _status(data)["nodes"] if n["id"] == 2)
                   .get("fenced"), 10, "broker 2 fenced")

        # The controller itself: SIGKILL and restart; metadata comes back from its log.
        before = _status(data)["partitions"]["cli-t"]["0"]
        assert _cli("cluster", "kill", "0", "--data-dir", str(data)).returncode == 0
        assert _cli("cluster", "start", "0", "--data-dir", str(data)).returncode == 0
        after = wait_until(lambda: _status(data).get("partitions"), 10, "controller answers")
        assert after["cli-t"]["0"]["leader_epoch"] >= before["leader_epoch"]
        assert after["cli-t"]["0"]["replicas"] == before["replicas"]

        assert _cli("cluster", "start", "2", "--data-dir", str(data)).returncode == 0
        st = _status(data)
        assert next(n for n in st["nodes"] if n["id"] == 2)["alive"]
        assert st["bootstrap"] == bootstrap  # restarted on its previous port
        wait_until(lambda: sorted(_status(data)["partitions"]["cli-t"]["0"]["isr"]) == [1, 2, 3],
                   30, "broker 2 back in the ISR")
        assert _produce(data, "cli-t", [f"y{i}" for i in range(100)]).returncode == 0
        with KafkaConnection(bootstrap.split(",")[0]) as conn:
            md = conn.request(3, 9, {"topics": [{"name": "cli-t"}],
                                     "allow_auto_topic_creation": False})
            assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
            part = md.topics[0].partitions[0]
            reg = _status(data)["partitions"]["cli-t"]["0"]
            assert (part.leader_id, part.leader_epoch) == (reg["leader"], reg["leader_epoch"])
            assert sorted(part.isr_nodes) == [1, 2, 3]

        # topic describe (any broker): every replica's LEO, HW and epochs from its own broker.
        described = _cli("topic", "describe", "cli-t", "--bootstrap-server",
                         bootstrap.split(",")[-1])
        assert described.returncode == 0, described.stderr
        for r in (1, 2, 3):
            assert f"    replica {r}: LEO " in described.stdout, described.stdout
        assert "HW -1" not in described.stdout
        down = _cli("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
        up.wait(60)
        assert up.returncode == 0
        assert not any(n["alive"] for n in _status(data)["nodes"])
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
            up.wait(60)
