"""A real Prometheus server (Debian's ``prometheus``) scrapes a real 3-broker cluster: the
addresses come from ``floodmark cluster status --json`` (``"metrics"`` of each node), and
under-replicated partitions are queried through a broker kill (0, then 1 on the leader, the
controller's fenced broker count 1, the leader's ISR shrink counted), and the records produced
are the topic's ``messagesin``. Every query of the shipped
Grafana dashboard (docs/grafana/floodmark-dashboard.json) is run against the same server."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from floodmark.cluster import LocalCluster
from floodmark.ports import free_port
from tests.cluster.helpers import start_cluster, stop_process, wait_until

PROMETHEUS = shutil.which("prometheus")  # ./dev setup installs Debian's prometheus
pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
]
REPO = Path(__file__).resolve().parents[2]
TOPIC = "scraped"


def _status(cluster: LocalCluster) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "floodmark.cli", "cluster", "status", "--json",
                          "--data-dir", str(cluster.data_dir)], capture_output=True, text=True,
                         timeout=60, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    status: dict[str, Any] = json.loads(out.stdout)
    return status


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path / "cluster", metrics=True)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def prometheus(cluster: LocalCluster, tmp_path: Path) -> Iterator[str]:
    status = _status(cluster)
    targets = {n["role"]: [] for n in status["nodes"]}  # type: dict[str, list[str]]
    for n in status["nodes"]:
        url = urllib.parse.urlparse(n["metrics"])
        assert url.path == "/metrics", n
        targets[n["role"]].append(url.netloc)
    jobs = "".join(
        f"  - job_name: floodmark-{role}\n    static_configs:\n      - targets: {json.dumps(t)}\n"
        for role, t in sorted(targets.items()))
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\n"
                      f"scrape_configs:\n{jobs}")
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")  # noqa: SIM115 - closed below
    assert PROMETHEUS, "Debian's prometheus is missing: ./dev setup installs it"
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url), 30, "prometheus to answer")
        yield url
    finally:
        stop_process(proc)
        log.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def _query(url: str, promql: str) -> float | None:
    """The single value of an instant query (summed), or None when it has no result yet."""
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as resp:
        answer = json.loads(resp.read())
    assert answer["status"] == "success", answer
    result = answer["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_prometheus_sees_under_replicated_partitions_through_a_broker_kill(
        cluster: LocalCluster, prometheus: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
        fut.result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(TOPIC, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0

    wait_until(lambda: _query(prometheus, "count(up == 1)") == 4, 30,
               "prometheus scraping the controller and 3 brokers")
    urp = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
    wait_until(lambda: _query(prometheus, urp) == 0, 30, "no under-replicated partitions")
    wait_until(lambda: _query(prometheus, f'max(kafka_log_log_logendoffset{{topic="{TOPIC}"}})')
               == 100, 30, "the log end offset of every replica scraped")
    assert _query(prometheus, "sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1
    # BrokerTopicMetrics with a topic label, as the JMX exporter names them.
    messages_in = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
    wait_until(lambda: _query(prometheus, messages_in) == 100, 30, "the topic's messagesin")
    assert _query(prometheus,
                  'sum(kafka_network_requestmetrics_requests_total{request="Produce"})') >= 1

    # Every query of the shipped Grafana dashboard is valid PromQL and finds its series.
    dashboard = json.loads((REPO / "docs" / "grafana" / "floodmark-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            if "lag" in target["expr"] or "rate(" in target["expr"]:
                _query(prometheus, target["expr"])  # no consumer group / too young for rate
            else:
                assert _query(prometheus, target["expr"]) is not None, target["expr"]

    leader = cluster.leader_of(TOPIC)
    victim = next(b for b in cluster.broker_ids if b != leader)
    cluster.kill(victim, signal.SIGKILL)
    wait_until(lambda: _query(prometheus, urp) == 1, 30,
               "the leader's under-replicated partition in prometheus")
    wait_until(lambda: _query(prometheus, "count(up == 0)") == 1, 30, "the dead broker's target")
    # The controller fences the dead broker (session timeout) and every view agrees.
    for promql in ("kafka_controller_kafkacontroller_fencedbrokercount",
                   "floodmark_controller_underreplicatedpartitions",
                   "sum(kafka_server_replicamanager_isrshrinks_total)",
                   f'kafka_cluster_partition_underreplicated{{topic="{TOPIC}"}}'):
        wait_until(lambda q=promql: _query(prometheus, q) == 1, 30, f"{promql} == 1")
    assert _query(prometheus, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
