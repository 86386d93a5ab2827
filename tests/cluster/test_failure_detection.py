"""Issue 11 item 5: a broker whose process died is fenced as soon as its connections to the
controller drop (not after the session timeout); a broker that is merely stopped (SIGSTOP keeps
its sockets open) is still fenced only after the session timeout. Real processes."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 6000


def _broker(cluster: Any, broker_id: int) -> dict[str, Any]:
    status = cluster.controller_status() or {}
    return next((b for b in status.get("brokers", []) if b["id"] == broker_id), {})


def test_dead_broker_fenced_at_once_stopped_broker_after_the_session(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "fd-quorum11",
                            **{"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    try:
        wait_until(lambda: all(_broker(cluster, b) and not _broker(cluster, b)["fenced"]
                               for b in cluster.broker_ids), 60, "every broker unfenced")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("fd", 1, 3)])["fd"].result(30)
        leader = wait_until(lambda: cluster.leader_of("fd") if cluster.leader_of("fd") > 0
                            else None, 30, "a leader for fd")

        # SIGKILL: the kernel closes its sockets; the controller fences it and elects a new
        # leader long before the 6 s session timeout.
        killed_at = time.monotonic()
        cluster.kill(leader, signal.SIGKILL)
        wait_until(lambda: _broker(cluster, leader).get("fenced") is True, 10,
                   "the killed broker fenced", step_s=0.02)
        fenced_s = time.monotonic() - killed_at
        new_leader = wait_until(lambda: cluster.leader_of("fd") not in (leader, -1)
                                and cluster.leader_of("fd"), 10, "a new leader", step_s=0.02)
        failover_s = time.monotonic() - killed_at
        assert fenced_s < SESSION_TIMEOUT_MS / 1000 / 3, fenced_s
        print(f"SIGKILL of leader {leader}: fenced after {fenced_s:.2f} s, new leader "
              f"{new_leader} after {failover_s:.2f} s (session timeout "
              f"{SESSION_TIMEOUT_MS / 1000:.0f} s)")

        # SIGSTOP: the sockets stay open; it is fenced only when its session expires.
        stopped = next(b for b in cluster.broker_ids if b not in (leader,))
        stopped_at = time.monotonic()
        cluster.kill(stopped, signal.SIGSTOP)
        try:
            time.sleep(SESSION_TIMEOUT_MS / 1000 * 0.6)
            assert _broker(cluster, stopped).get("fenced") is False  # slow is not dead
            wait_until(lambda: _broker(cluster, stopped).get("fenced") is True,
                       SESSION_TIMEOUT_MS / 1000 + 10, "the stopped broker fenced")
            waited_s = time.monotonic() - stopped_at
            assert waited_s >= SESSION_TIMEOUT_MS / 1000 * 0.9, waited_s
            print(f"SIGSTOP of broker {stopped}: fenced after {waited_s:.2f} s")
        finally:
            cluster.kill(stopped, signal.SIGCONT)
    finally:
        cluster.stop()


def test_a_stalled_controller_does_not_fence_brokers_that_gave_up_on_it(tmp_path: Path) -> None:
    """SIGSTOP the controller long enough for every broker's calls to time out and close their
    connections; after SIGCONT those closed connections say nothing about the brokers (the
    brokers reconnect), so nobody is fenced (the controller restarts every session)."""
    from floodmark.cluster.local import CONTROLLER_ID

    cluster = start_cluster(tmp_path / "stall-quorum11",
                            **{"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    try:
        wait_until(lambda: all(_broker(cluster, b) and not _broker(cluster, b)["fenced"]
                               for b in cluster.broker_ids), 60, "every broker unfenced")
        before = {b: _broker(cluster, b)["broker_epoch"] for b in cluster.broker_ids}
        cluster.kill(CONTROLLER_ID, signal.SIGSTOP)
        time.sleep(13)  # past the brokers' heartbeat (5 s) and metadata poll (12 s) timeouts
        cluster.kill(CONTROLLER_ID, signal.SIGCONT)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            for b in cluster.broker_ids:
                info = _broker(cluster, b)
                assert info.get("fenced") is False, (b, info)
                assert info.get("broker_epoch") == before[b]
            time.sleep(0.1)
    finally:
        cluster.stop()
