"""Combined mode: node 1 runs the broker and the controller in one process; nodes 2 and 3 are
brokers that use it as their controller. RF=3 acks=all works, and node 1's controlled shutdown
moves its leaderships away before it stops."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.controller import rpc
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

_LINE = re.compile(r"^floodmark (controller|broker \d+) listening on (\S+):(\d+)", re.M)


def _start(cmd: list[str], log: Path, want: str) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    fh = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    found: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and want not in found:
        for m in _LINE.finditer(log.read_text(errors="replace")):
            found[m.group(1)] = int(m.group(3))
        time.sleep(0.05)
    assert want in found, log.read_text(errors="replace")[-2000:]
    return proc, found


def test_combined_controller_and_broker(tmp_path: Path) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        base = [sys.executable, "-m", "floodmark.broker.cluster_member"]
        p1, ports = _start([*base, "--node-id", "1", "--controller", "127.0.0.1:0",
                            "--controller-data-dir", str(tmp_path / "ctl"), "--data-dir",
                            str(tmp_path / "b1"), "--broker-session-timeout-ms", "2000",
                            "--set", "broker.heartbeat.interval.ms=200"],
                           tmp_path / "b1.log", "broker 1")
        procs.append(p1)
        controller = f"127.0.0.1:{ports['controller']}"
        bootstrap = [f"127.0.0.1:{ports['broker 1']}"]
        for n in (2, 3):
            p, found = _start([*base, "--node-id", str(n), "--controller", controller,
                               "--data-dir", str(tmp_path / f"b{n}"), "--set",
                               "broker.heartbeat.interval.ms=200"],
                              tmp_path / f"b{n}.log", f"broker {n}")
            procs.append(p)
            bootstrap.append(f"127.0.0.1:{found[f'broker {n}']}")
        servers = ",".join(bootstrap)
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic("comb", 3, 3, config={"min.insync.replicas": "2"})]
                            )["comb"].result(20)
        prod = Producer({"bootstrap.servers": servers, "acks": "all"})
        for i in range(300):
            prod.produce("comb", value=b"c%d" % i, partition=i % 3)
        assert prod.flush(30) == 0

        def status() -> dict:
            return rpc.blocking_call(controller, "status", {})["result"]

        led_by_1 = [p for p, r in status()["topics"]["comb"].items() if r["leader"] == 1]
        assert led_by_1, "round-robin assignment gives node 1 a leadership"
        # Controlled shutdown of broker 3 (a pure broker) moves its leaderships away.
        procs[2].terminate()
        procs[2].wait(30)
        assert all(r["leader"] != 3 for r in status()["topics"]["comb"].values())
        c = Consumer({"bootstrap.servers": servers, "group.id": "x", "enable.auto.commit": False})
        c.assign([TopicPartition("comb", p, OFFSET_BEGINNING) for p in range(3)])
        got = set()
        wait_until(lambda: (got.update(m.value() for m in c.consume(100, 0.5)
                                       if m.error() is None) or len(got) >= 300),
                   30, "all records")
        c.close()
        assert got == {b"c%d" % i for i in range(300)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(30)
