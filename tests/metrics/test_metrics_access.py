"""A process's ``/metrics`` behind TLS and a password (issue 21 §6), scraped by a real
Prometheus: a controller started with ``--metrics-keystore`` (HTTPS) and
``--metrics-password-file`` (HTTP Basic); Prometheus with the CA and the password scrapes it
(``up`` is 1), a job with a wrong password gets 401 (``up`` is 0), and a request without
credentials is refused."""

from __future__ import annotations

import base64
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from floodmark.ports import free_port
from tests.cluster.helpers import stop_process, wait_until
from tests.metrics.test_prometheus import PROMETHEUS, _query, _ready
from tests.tls_pki import make_pki

pytestmark = pytest.mark.integration


def test_prometheus_scrapes_metrics_over_https_with_a_password(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "tls")
    secret = tmp_path / "metrics.password"
    secret.write_text("scrape-secret-21\n")
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-it\n")
    controller = subprocess.Popen(
        [sys.executable, "-m", "floodmark.controller", "--data-dir", str(tmp_path / "c"),
         "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
         "--metrics-keystore", str(pki.broker.keystore),
         "--metrics-password-file", str(secret)],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "controller.log", "w"), text=True)  # noqa: SIM115
    prometheus = None
    try:
        assert controller.stdout is not None
        line = controller.stdout.readline()
        m = re.search(r"metrics on https://(\S+):(\d+)/metrics", line)
        assert m, line
        target = f"{m.group(1)}:{m.group(2)}"
        url = f"https://{target}/metrics"
        trust = ssl.create_default_context(cafile=str(pki.ca))
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10, context=trust)
        assert refused.value.code == 401
        auth = base64.b64encode(b"prometheus:scrape-secret-21").decode()
        with urllib.request.urlopen(urllib.request.Request(
                url, headers={"Authorization": f"Basic {auth}"}), timeout=10,
                context=trust) as answer:
            assert b"floodmark" in answer.read() or answer.status == 200

        def job(name: str, password_file: Path) -> str:
            return (f"  - job_name: {name}\n    scheme: https\n"
                    f"    tls_config:\n      ca_file: {pki.ca}\n"
                    f"    basic_auth:\n      username: prometheus\n"
                    f"      password_file: {password_file}\n"
                    f"    static_configs:\n      - targets: ['{target}']\n")
        config = tmp_path / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 500ms\nscrape_configs:\n"
                          + job("secured", secret) + job("wrong-password", wrong))
        port = free_port()
        assert PROMETHEUS, "Debian's prometheus is missing: ./dev setup installs it"
        log = open(tmp_path / "prometheus.log", "w")  # noqa: SIM115 - closed with the process
        prometheus = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                                       f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{port}"],
                                      stdout=log, stderr=subprocess.STDOUT)
        prom = f"http://127.0.0.1:{port}"
        wait_until(lambda: _ready(prom), 30, "prometheus to answer")
        wait_until(lambda: _query(prom, 'up{job="secured"}') == 1.0, 30,
                   "an authenticated HTTPS scrape")
        wait_until(lambda: _query(prom, 'up{job="wrong-password"}') == 0.0, 30,
                   "the wrong password's scrape to fail")
        assert (_query(prom, 'kafka_controller_kafkacontroller_activecontrollercount'
                             '{job="secured"}') is not None)
    finally:
        if prometheus is not None:
            stop_process(prometheus)
        stop_process(controller)
    assert "scrape-secret-21" not in (tmp_path / "controller.log").read_text()
