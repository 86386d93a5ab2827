"""``kafka_controller_kafkacontroller_activecontrollercount`` on a real quorum of 3 controllers,
scraped by a real Prometheus (the fixture of ``test_prometheus``): the sum over the controllers
is 1, the 1 is on the controller the quorum elected, and after that process is SIGKILLed the 1
moves to the new active controller (the dead target's series go stale), so the usual
"sum != 1" alert is quiet before and after the failover."""

from __future__ import annotations

import json
import signal
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import cluster_progress, wait_until
from tests.metrics.test_prometheus import _status, prometheus

__all__ = ["prometheus"]  # the fixture, reused
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", brokers=1, controllers=3, controller_settings={
        "controller.quorum.request.timeout.ms": "2000",
        "broker.session.timeout.ms": "30000"}).start()
    try:
        yield c
    finally:
        c.stop()


def _per_instance(url: str, promql: str) -> dict[str, float]:
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as resp:
        answer = json.loads(resp.read())
    assert answer["status"] == "success", answer
    return {r["metric"]["instance"]: float(r["value"][1]) for r in answer["data"]["result"]}


def test_one_active_controller_and_it_moves_with_the_quorum_leader(
        cluster: LocalCluster, prometheus: str) -> None:
    instance_of = {int(n["id"]): urllib.parse.urlparse(n["metrics"]).netloc
                   for n in _status(cluster)["nodes"] if n["role"] == "controller"}
    assert len(instance_of) == 3, instance_of

    def progress() -> object:
        return cluster_progress(cluster)

    def ones() -> list[str]:
        values = _per_instance(prometheus, ACTIVE)
        if len(values) != 3 - dead_count or sum(values.values()) != 1:
            return []
        return [i for i, v in values.items() if v == 1]

    dead_count = 0
    first = cluster.wait_active_controller(30)
    (instance,) = wait_until(ones, 20, "one active controller in prometheus", progress=progress)
    assert instance == instance_of[first]

    cluster.kill(first, signal.SIGKILL)
    dead_count = 1

    def moved() -> list[str]:
        found = ones()
        return found if found and found != [instance_of[first]] else []

    (instance,) = wait_until(moved, 20, "the active controller count on the new leader",
                             progress=progress)
    successor = cluster.active_controller(timeout_s=2)
    assert successor is not None and successor != first
    assert instance == instance_of[successor]
