"""Issue 12: brokers on several machines, network namespaces standing in for the machines.

Machine ``a`` runs the controller and broker 1 (``cluster up --listen-host <a's address>``);
machines ``b`` and ``c`` run one broker each that joins a's controller (``cluster up --controller
A:PORT --first-broker-id N``; c binds every interface and advertises its own address). A client
on a fourth machine creates an RF=3 topic, produces and consumes through any broker; every broker
reaches the others at their advertised addresses (replication works), and nobody listens on
loopback only. Then the leader's machine loses its broker, and the client still reads everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from floodmark.chaos.netns import Lab, LabError, check_available
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

BASE_PORT = 9100  # every namespace has ports of its own: no clash with the machine's


class NamedLab(Lab):
    """The chaos lab with this test's name in its namespaces (``cli12...-a``)."""

    def __init__(self, hosts: Sequence[str]) -> None:
        super().__init__(hosts)
        self.id = f"cli12x{os.getpid() % 10000}"
        self.bridge_ns = f"{self.id}-br"


def _lab_or_skip() -> None:
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))


def fm(lab: Lab, host: str, *args: str, stdin: str | None = None,
       timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``floodmark ARGS`` run on ``host``."""
    return subprocess.run(lab.command(host, [sys.executable, "-m", "floodmark.cli", *args]),
                          input=stdin, capture_output=True, text=True, timeout=timeout_s)


def _ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_brokers_on_three_machines(tmp_path: Path) -> None:
    _lab_or_skip()
    lab = NamedLab(["a", "b", "c", "client"]).open()
    ip = lab.address
    dirs = {h: tmp_path / h for h in ("a", "b", "c")}
    settings = ["--set", "default.replication.factor=3", "--set", "replica.lag.time.max.ms=2000"]
    controller = f"{ip['a']}:{BASE_PORT}"
    try:
        _ok(fm(lab, "a", "cluster", "up", "--detach", "--brokers", "1", "--controllers", "1",
               "--base-port",
               str(BASE_PORT), "--listen-host", ip["a"], "--controller-set",
               "broker.session.timeout.ms=2000", *settings, "--data-dir", str(dirs["a"])))
        _ok(fm(lab, "b", "cluster", "up", "--detach", "--brokers", "1", "--controller",
               controller, "--first-broker-id", "2", "--base-port", str(BASE_PORT),
               "--listen-host", ip["b"], *settings, "--data-dir", str(dirs["b"])))
        _ok(fm(lab, "c", "cluster", "up", "--detach", "--brokers", "1", "--controller",
               controller, "--first-broker-id", "3", "--base-port", str(BASE_PORT),
               "--listen-host", "0.0.0.0", "--advertised-host", ip["c"], *settings,
               "--data-dir", str(dirs["c"])))
        status = json.loads(_ok(fm(lab, "b", "cluster", "status", "--json", "--data-dir",
                                   str(dirs["b"]))))
        assert status["controller"] == controller
        assert status["bootstrap"] == f"{ip['b']}:{BASE_PORT + 2}"
        assert [n["id"] for n in status["nodes"]] == [2]  # b runs broker 2 only
        registered = wait_until(lambda: [
            b for b in json.loads(fm(lab, "a", "cluster", "status", "--json", "--data-dir",
                                     str(dirs["a"])).stdout or "{}").get("nodes", [])
            if "fenced" in b], 60, "broker 1 registered")
        assert registered[0]["id"] == 1

        # The client machine knows one address; metadata names every broker at its own address.
        bs = ["--bootstrap-server", f"{ip['a']}:{BASE_PORT + 1}"]
        def create() -> bool:  # until the controller has all three brokers
            out = fm(lab, "client", "topic", "create", "spread", "--partitions", "3", *bs)
            return out.returncode == 0 or "TOPIC_ALREADY_EXISTS" in out.stderr

        wait_until(create, 60, "3 live brokers")
        described = json.loads(_ok(fm(lab, "client", "topic", "describe", "spread", "--json",
                                      *bs)))
        for p in described["partitions"]:
            assert sorted(p["replicas"]) == [1, 2, 3]
        lines = "".join(f"k{i}|v{i}\n" for i in range(300))
        _ok(fm(lab, "client", "produce", "spread", "--key-separator", "|", *bs, stdin=lines))

        def replicated() -> bool:
            d = json.loads(fm(lab, "client", "topic", "describe", "spread", "--json",
                              *bs).stdout or "{}")
            return bool(d) and all(
                sorted(p["isr"]) == [1, 2, 3] and len(p["replica_states"]) == 3
                and all("error" not in r and r["log_end_offset"] == p["log_end_offset"]
                        for r in p["replica_states"]) for p in d["partitions"])

        wait_until(replicated, 60, "every replica, read from its own machine, caught up")
        assert sum(p["high_watermark"] for p in json.loads(_ok(fm(
            lab, "client", "topic", "describe", "spread", "--json", *bs)))["partitions"]) == 300

        # --listen-host binds what it says: a's broker its address only, c's every interface
        # (so c's own loopback reaches it too).
        assert fm(lab, "a", "topic", "list", "--bootstrap-server",
                  f"127.0.0.1:{BASE_PORT + 1}").returncode == 1
        assert "spread" in _ok(fm(lab, "c", "topic", "list", "--bootstrap-server",
                                  f"127.0.0.1:{BASE_PORT + 3}")).split()

        # Machine b loses its broker: the client, still bootstrapping from a, reads everything.
        _ok(fm(lab, "b", "cluster", "kill", "2", "--data-dir", str(dirs["b"])))
        got = _ok(fm(lab, "client", "consume", "spread", "--from-beginning", "--max-messages",
                     "300", "--print-key", "--key-separator", "|", *bs))
        assert sorted(got.splitlines()) == sorted(lines.splitlines())
    finally:
        for h in ("c", "b", "a"):  # brokers before the controller
            if (dirs[h] / "cluster.json").exists():
                fm(lab, h, "cluster", "down", "--data-dir", str(dirs[h]))
        lab.close()
