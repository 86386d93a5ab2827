"""A SIGKILLed active controller is replaced before the fetch timeout (issue 11 Build 5, for the
controller quorum): the followers' connections to the dead leader close, each follower stops
vouching for it and one of them asks for a pre-vote after a short random delay.

Real processes with a long ``controller.quorum.fetch.timeout.ms`` (10 s), so that a successor
elected by the timeout and one elected because the connection closed are far apart: the new
active controller must be there (and commit a topic) well before the timeout could have fired.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until

FETCH_TIMEOUT_MS = 10_000


def test_a_killed_active_controller_is_replaced_before_the_fetch_timeout(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, brokers=1, controllers=3, controller_settings={
        "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
        "controller.quorum.request.timeout.ms": "2000",
        "broker.session.timeout.ms": "30000"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("before", 1, 1)])["before"].result(60)
        dead = cluster.wait_active_controller(30)
        killed_at = time.monotonic()
        cluster.kill(dead, signal.SIGKILL)
        def new_active() -> list[int]:
            found = cluster.active_controller(timeout_s=0.5)
            return [found] if found not in (None, dead) else []

        (successor,) = wait_until(new_active, 30, "a new active controller")
        elected_s = time.monotonic() - killed_at
        assert elected_s < FETCH_TIMEOUT_MS / 2000, (
            f"controller {successor} active {elected_s:.2f} s after the kill: the followers "
            f"waited for the fetch timeout")
        admin.create_topics([NewTopic("after", 1, 1)])["after"].result(60)
        log = cluster.log_path(successor).read_text()
        assert f"connection to quorum leader {dead} closed" in log
    finally:
        cluster.stop()
