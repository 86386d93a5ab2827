"""Brokers learn a moved controller's endpoint from the quorum (KIP-853), as Kafka's do.

Three controllers and two brokers, the brokers given the three original addresses
(``--controller``, Kafka's ``controller.quorum.bootstrap.servers``). The two followers are
restarted on new ports, one after the other (data dirs kept, ``controller.quorum.voters``
unchanged); each sends UpdateRaftVoter, and the committed voter set records name their new
endpoints. Then the leader is SIGKILLed: the two moved controllers elect one of them, and
every address in the brokers' lists is dead. A broker that knew controllers only by its list
could never heartbeat to the new active controller again (it is fenced, and CreateTopics
times out); one that replays the voter set dials them where they listen now. Run twice: the
brokers given ``--controller`` (addresses without ids: which controller each is, they learn from
its answers) and ``--controller-quorum-voters`` (ids known from the start)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from floodmark.ports import free_port
from tests.cluster.helpers import stop_process, wait_until
from tests.cluster.test_controller_quorum import Quorum
from tests.conftest import REPO

pytestmark = pytest.mark.integration

BROKERS = (101, 102)


def _start_broker(root: Path, node: int, controllers: list[str]
                  ) -> tuple[subprocess.Popen[bytes], str]:
    log = (root / f"broker-{node}.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "floodmark.broker.cluster_member", "--node-id", str(node),
         *controllers, "--data-dir", str(root / f"broker-{node}"),
         "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=log, cwd=str(REPO),
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    log.close()
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert "listening on" in line, line
    return proc, line.strip().rsplit(" ", 1)[-1]


def _brokers(q: Quorum, node: int) -> dict[int, dict[str, Any]]:
    """The brokers as controller ``node`` sees them (``metadata_offset``: reported in the
    heartbeats it received)."""
    try:
        status = q.call(node, "status", {})["result"]
    except Exception:  # not answering yet
        return {}
    return {int(b["id"]): b for b in status["brokers"]}


def _move(q: Quorum, node: int, leader: int) -> str:
    """Restart controller ``node`` on a new port; wait until the leader records it there and
    it follows from there."""
    stop_process(q.procs.pop(node))
    q.ports[node] = free_port()
    new = q.address(node)
    q.extra_args = ("--listen", new)
    q.start(node)
    q.extra_args = ()

    def following() -> bool:
        mine, theirs = q.describe(node), q.describe(leader)
        return bool(mine and theirs and theirs["voter_endpoints"].get(str(node)) == new
                    and mine["role"] == "follower" and mine["leader_id"] == leader
                    and mine["high_watermark"] == theirs["high_watermark"])
    wait_until(following, 30, f"controller {node} recorded at {new} and following")
    return new


@pytest.mark.parametrize("given", ["--controller", "--controller-quorum-voters"])
def test_brokers_reach_an_active_controller_only_the_voter_set_knows(tmp_path: Path,
                                                                     given: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    q = Quorum(tmp_path)
    brokers: list[subprocess.Popen[bytes]] = []
    try:
        for node in (1, 2, 3):
            q.start(node)
        leader = int(wait_until(lambda: q.active([1, 2, 3]), 30, "an active controller"))
        bootstrap = [given, ",".join(q.address(n) for n in (1, 2, 3))
                     if given == "--controller" else q.voters]
        started = [_start_broker(tmp_path, b, bootstrap) for b in BROKERS]
        brokers.extend(proc for proc, _ in started)
        wait_until(lambda: all(not b["fenced"] for b in _brokers(q, leader).values())
                   and set(_brokers(q, leader)) == set(BROKERS), 30, "both brokers unfenced")

        moved = [n for n in (1, 2, 3) if n != leader]
        new = {n: _move(q, n, leader) for n in moved}
        described = q.describe(leader)
        assert described is not None
        hw = int(described["high_watermark"])
        # Both brokers have applied the voter set records (their heartbeats say how far).
        wait_until(lambda: all(int(b.get("metadata_offset", -1)) >= hw
                               for b in _brokers(q, leader).values()), 30,
                   f"both brokers' metadata past offset {hw}")

        q.procs[leader].send_signal(signal.SIGKILL)
        q.procs[leader].wait(10)
        active = int(wait_until(lambda: q.active(moved), 30,
                                "a new active controller among the moved two"))
        # Every address the brokers were given is dead now; they heartbeat to the new active
        # controller at its new port (it records the progress each heartbeat reports).
        wait_until(lambda: (seen := _brokers(q, active)) and all(
            not seen[b]["fenced"] and "metadata_offset" in seen[b]
            and seen[b]["last_heartbeat_ms_ago"] < 1500 for b in BROKERS), 30,
            f"both brokers heartbeating to controller {active} at {new[active]}")

        admin = AdminClient({"bootstrap.servers": started[0][1]})
        admin.create_topics([NewTopic("after-move", 2, 2)],
                            request_timeout=30)["after-move"].result(40)
        producer = Producer({"bootstrap.servers": started[1][1], "acks": "all",
                             "enable.idempotence": True, "message.timeout.ms": 30000})
        for i in range(10):
            producer.produce("after-move", f"m{i}".encode(), partition=i % 2)
        assert producer.flush(40) == 0
        assert "after-move" in q.call(active, "status", {})["result"]["topics"]
        for b in BROKERS:  # still unfenced after the writes
            assert not _brokers(q, active)[b]["fenced"]
    finally:
        for proc in brokers:
            stop_process(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        q.stop_all()
