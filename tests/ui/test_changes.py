"""The dashboard's configs, guarded changes and per-topic throughput, in Debian's chromium
against a real broker (one, with its Prometheus endpoint, as ``LocalCluster`` starts it).

With ``--allow-changes``: a topic created from the page's form (after its confirmation), its
configs and the broker's read FROM THE PAGE with their sources (a topic override, a broker's own
dynamic value, the cluster-wide dynamic default, a static setting, the defaults: set by
confluent-kafka's admin client), its throughput and size while confluent-kafka produces and a
consumer group commits, the group's offsets reset from the page (the CLI planner's plan shown in
the confirmation, then read back by confluent-kafka), and the topic deleted (the confirmation
wants its name typed). A cross-site POST is refused. (Without the flag: ``test_browser``.)
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api

from floodmark.cli.main import main as cli_main
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until
from tests.ui.conftest import chromium, run_ui

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "made"
GROUP = "readers"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", 1, {"log.cleaner.threads": "1"}).start()
    try:
        yield c
    finally:
        c.stop()


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None
          ) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _wait(page: Any, script: str, pred: Any, what: str, timeout_s: float = 20,
          arg: Any = None) -> Any:
    last: Any = None

    def check() -> bool:
        nonlocal last
        last = page.evaluate(script, arg)
        return bool(pred(last))

    try:
        wait_until(check, timeout_s, what, step_s=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the page shows {last}") from None
    return last


STATS = """(topic) => { const r = document.querySelector(`tr.topic-stats[data-topic="${topic}"]`);
  return r ? { ...r.dataset } : null; }"""
CONFIGS = """() => ({ section: { ...document.getElementById('configs-section').dataset },
  url: location.search,
  rows: Object.fromEntries([...document.querySelectorAll('#configs-table tr.config')]
    .map((r) => [r.dataset.name, { value: r.dataset.value, source: r.dataset.source,
                                   sensitive: r.dataset.sensitive }])) })"""
STATUS = "() => ({ ...document.getElementById('change-status').dataset, " \
         "text: document.getElementById('change-status').textContent })"
CONFIRM = "() => ({ hidden: document.getElementById('confirm').hidden, " \
          "text: document.getElementById('confirm-text').textContent, " \
          "yes: !document.getElementById('confirm-yes').disabled, " \
          "plan: [...document.querySelectorAll('#reset-plan tr.planned')].map((r) => " \
          "[r.dataset.topic, Number(r.dataset.partition), Number(r.dataset.newOffset)]) })"


def _traffic(bootstrap: str, stop: threading.Event) -> None:
    """Records into partition 0 and a group reading and committing them, until ``stop``
    (bounded: 60 s at most)."""
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                  "auto.offset.reset": "earliest", "auto.commit.interval.ms": 200})
    c.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            # Paced by what the broker has acknowledged: unbounded, librdkafka's queue filled on
            # a loaded machine, produce() raised BufferError, this thread died and the page's
            # rates fell to 0 while the test waited for them (a CI run of fad376d).
            if len(p) < 2000:
                for i in range(20):
                    p.produce(TOPIC, value=b"x" * 100, key=b"k%d" % i, partition=0)
            p.poll(0)
            c.poll(0.05)
        p.flush(10)
    finally:
        c.close()  # commits, leaves: the group is Empty and may be reset


def test_configs_changes_and_throughput(cluster: LocalCluster, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    with run_ui(tmp_path / "ui.log", "--data-dir", str(cluster.data_dir), "--interval-ms", "250",
                "--allow-changes") as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)

            # Create a topic from the form: nothing happens until the confirmation.
            page.wait_for_selector("#create-topic:not([hidden])")
            page.fill("#create-name", TOPIC)
            page.fill("#create-partitions", "2")
            page.fill("#create-rf", "1")
            page.fill("#create-configs", "retention.ms=123456")
            page.click("#create-go")
            confirm = _wait(page, CONFIRM, lambda s: not s["hidden"], "the confirmation")
            assert confirm["text"] == f"create topic {TOPIC}?"
            assert page.evaluate(STATS, TOPIC) is None  # not yet created
            page.click("#confirm-yes")
            status = _wait(page, STATUS, lambda s: s.get("ok"), "the create's answer")
            assert status["ok"] == "true", status
            _wait(page, STATS, lambda s: s and s["partitions"] == "2", "the new topic's row",
                  arg=TOPIC)

            # Configs with their sources, every layer: a broker's own dynamic value (set by
            # confluent-kafka's admin client), the cluster-wide default (floodmark's CLI, as
            # kafka-configs.sh --entity-default: librdkafka cannot name the default).
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
                ConfigEntry("log.cleaner.backoff.ms", "12345",
                            incremental_operation=AlterConfigOpType.SET)])
            for fut in admin.incremental_alter_configs([res]).values():
                fut.result(30)
            assert cli_main(["config", "alter", "--entity-type", "brokers", "--entity-default",
                             "--add-config", "log.retention.bytes=99999999",
                             "--bootstrap-server", cluster.bootstrap]) == 0
            page.click(f"button[data-configs-topic='{TOPIC}']")
            shown = _wait(page, CONFIGS, lambda s: s["section"].get("loaded") == "true"
                          and s["rows"], "the topic's configs")
            assert f"configs=topic%3A{TOPIC}" in shown["url"]
            assert shown["rows"]["retention.ms"] == {
                "value": "123456", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": "false"}
            assert shown["rows"]["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
            assert shown["rows"]["retention.bytes"] == {
                "value": "99999999", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
                "sensitive": "false"}
            other = browser.new_page()
            other.on("pageerror", lambda exc: errors.append(str(exc)))
            other.goto(f"{url}?configs=broker:1")  # the broker's view, from its URL
            shown = _wait(other, CONFIGS, lambda s: s["section"].get("loaded") == "true"
                          and s["rows"], "broker 1's configs")
            rows = shown["rows"]
            assert rows["log.cleaner.backoff.ms"]["source"] == "DYNAMIC_BROKER_CONFIG"
            assert rows["log.retention.bytes"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
            assert rows["log.cleaner.threads"] == {"value": "1", "source": "STATIC_BROKER_CONFIG",
                                                   "sensitive": "false"}
            assert rows["num.partitions"]["source"] == "DEFAULT_CONFIG"
            assert all(r["value"] == "" for r in rows.values() if r["sensitive"] == "true")
            other.close()

            # Throughput and size while records flow in and a group reads them.
            stop = threading.Event()
            traffic = threading.Thread(target=_traffic, args=(cluster.bootstrap, stop))
            traffic.start()
            try:
                seen = _wait(page, STATS, lambda s: s and all(
                    float(s.get(k) or 0) > 0 for k in ("recordsInPerS", "recordsOutPerS",
                                                   "bytesInPerS", "bytesOutPerS",
                                                   "sizeBytes", "sizeOnDiskBytes")),
                    "records and bytes flowing in and out, and a size", timeout_s=30, arg=TOPIC)
            finally:
                stop.set()
                traffic.join(30)
            assert int(seen["sizeOnDiskBytes"]) == int(seen["sizeBytes"])  # one replica
            written = int(wait_until(lambda: page.evaluate(
                f"() => Number(document.querySelector('#topics-table "
                f"tr[data-topic=\"{TOPIC}\"][data-partition=\"0\"]').dataset.highWatermark)")
                or None, 20, "partition 0's HW"))
            assert written > 5

            # Reset the group's offsets from the page: the plan in the confirmation, then
            # committed (the group is Empty once its consumer left).
            page.wait_for_selector(f"#reset-offsets:not([hidden]) #reset-group "
                                   f"option[value='{GROUP}']", state="attached")
            _wait(page, "() => [...document.querySelectorAll('#groups-table tr.group-offset')]"
                  ".map((r) => r.dataset.state)", lambda s: s == ["Empty"] or "Empty" in s,
                  "the group Empty")
            page.select_option("#reset-group", GROUP)
            page.select_option("#reset-topic", TOPIC)
            page.select_option("#reset-mode", "offset")
            page.fill("#reset-offset", "5")
            page.click("#reset-go")
            confirm = _wait(page, CONFIRM, lambda s: not s["hidden"] and s["plan"],
                            "the reset's plan")
            assert confirm["plan"] == [[TOPIC, 0, 5], [TOPIC, 1, 0]]  # kept within the log
            page.click("#confirm-yes")
            status = _wait(page, STATUS, lambda s: "reset" in s["text"] or s.get("ok") == "false",
                           "the reset's answer")
            assert status["ok"] == "true", status
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
            try:
                committed = c.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
                                        timeout=20)
            finally:
                c.close()
            assert [tp.offset for tp in committed] == [5, 0]

            # A cross-site POST is refused, whatever the flag.
            code, answer = _post(f"{url}api/topics/delete", {"topic": TOPIC},
                                 {"Origin": "http://evil.example"})
            assert code == 403 and "cross-site" in answer["error"], answer

            # Delete the topic: the confirmation wants its name typed.
            page.click(f"button.delete-topic[data-topic='{TOPIC}']")
            confirm = _wait(page, CONFIRM, lambda s: not s["hidden"], "the delete's confirmation")
            assert not confirm["yes"]
            page.fill("#confirm-input", TOPIC)
            page.click("#confirm-yes")
            _wait(page, STATS, lambda s: s is None, "the topic gone", arg=TOPIC)
            assert not errors, errors
        finally:
            browser.close()
