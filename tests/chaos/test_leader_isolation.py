"""Issue 8 on real processes in network namespaces: the partition leader is cut off from both
followers and the controller while the client still reaches it.

A controller and three brokers, each in a network namespace of its own on a private bridge; one
partition, RF=3, min.insync.replicas=2; a confluent-kafka producer (acks=all, idempotence on,
request.timeout.ms 2 s) in a client namespace writes about 200 records/s. The leader's namespace
drops every packet to and from the controller and the other brokers for 12 s (longer than the
session timeout, the replica lag time and several request timeouts); the client keeps reaching
it, so librdkafka retries the same sequences against the isolated leader. Then the partition heals
and the client reads everything back: every acknowledged record must be at its offset, once.

Before the fix (a retried duplicate acknowledged without waiting for the HW) this lost thousands of
acknowledged writes per run. Run with the broker's unsafe switch
(``floodmark.unsafe.ack.duplicates.before.commit``, the old behaviour) the isolated leader
acknowledged ~1,900 retried duplicates that it truncated after healing (``log_end_offset was
2359`` -> 436); with the fix it truncates only unacknowledged records (419 -> 416) and nothing
acknowledged is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from floodmark.chaos.netns import Lab, LabError, check_available
from tests.chaos.isolation_driver import Client

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 4000
ISOLATION_S = 12.0
REQUEST_TIMEOUT_MS = 2000
BROKERS = ("b1", "b2", "b3")


def _lab_or_skip() -> None:
    try:
        check_available()
    except LabError as exc:
        pytest.skip(str(exc))


def _run(tmp_path: Path, unsafe: bool = False) -> dict[str, Any]:
    _lab_or_skip()
    with Lab(["c", "ctl", *BROKERS]) as lab:
        procs: list[subprocess.Popen[bytes]] = []
        try:
            ctl = f"{lab.address['ctl']}:9093"
            procs.append(lab.popen("ctl", [
                sys.executable, "-m", "floodmark.controller", "--data-dir",
                str(tmp_path / "controller"), "--listen", ctl,
                "--broker-session-timeout-ms", str(SESSION_TIMEOUT_MS),
                "--auto-leader-rebalance-enable", "false"],
                stdout=subprocess.DEVNULL, stderr=open(tmp_path / "controller.log", "wb")))  # noqa: SIM115
            for i, name in enumerate(BROKERS, start=1):
                settings = ["--set", "replica.lag.time.max.ms=4000"]
                if unsafe:
                    settings += ["--set", "floodmark.unsafe.ack.duplicates.before.commit=true"]
                procs.append(lab.popen(name, [
                    sys.executable, "-m", "floodmark.broker.cluster_member", "--node-id", str(i),
                    "--controller", ctl, "--data-dir", str(tmp_path / name),
                    "--listen", f"{lab.address[name]}:9092", *settings],
                    stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"{name}.log", "wb")))  # noqa: SIM115
            bootstrap = ",".join(f"{lab.address[b]}:9092" for b in BROKERS)
            client = Client(lab, bootstrap, tmp_path / "client.log", REQUEST_TIMEOUT_MS)
            procs.append(client.proc)
            leader = client.next_event("leader", 180)["id"]
            assert leader in (1, 2, 3), leader
            client.wait_acked(400, stall_s=60)
            isolated = BROKERS[leader - 1]
            lab.isolate(isolated, ["ctl", *(b for b in BROKERS if b != isolated)])
            time.sleep(ISOLATION_S)  # the fault's duration, not a wait for progress
            lab.heal(isolated)
            healed_at = client.last.get("acked", 0)
            client.wait_acked(healed_at + 400, stall_s=90)  # writes resume after healing
            result = client.stop()
            result["leader_isolated"] = leader
            print(json.dumps(result))
            return result
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def test_isolated_leader_loses_no_acknowledged_write(tmp_path: Path) -> None:
    result = _run(tmp_path, unsafe=False)
    assert result["lost"] == 0, result
    assert result["duplicates"] == 0, result
    assert result["acked"] > 800 and result["unflushed"] == 0, result
