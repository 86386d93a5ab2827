"""The dashboard's message browser and its URLs, in Debian's chromium against a real broker.

One broker, a topic of two partitions: partition 0 empty, partition 1 holds 30 records written
by confluent-kafka with keys ``k0``..``k4``, JSON values, a header and timestamps one second
apart. The page opened without a URL picks the non-empty partition; the records it shows, their
text/JSON/hex renderings, a key search (and its bound), a timestamp (ListOffsets by timestamp)
and an offset are read FROM THE PAGE (data attributes of the rows) and compared with what was
written; every view's URL opens the same view in a new page. The JSON API refuses bad queries
with one line.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until
from tests.ui.conftest import chromium, run_ui

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "orders"
COUNT = 30


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", 1).start()
    try:
        yield c
    finally:
        c.stop()


def _fill(bootstrap: str) -> int:
    """30 records into partition 1; returns the first record's timestamp (ms)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        fut.result(30)
    base_ms = int(time.time() * 1000) - 100_000
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(COUNT):
        p.produce(TOPIC, key=f"k{i % 5}".encode(), value=json.dumps({"n": i}).encode(),
                  partition=1, timestamp=base_ms + i * 1000, headers=[("source", b"test")])
    assert p.flush(30) == 0
    return base_ms


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


READ_ROWS = """() => ({
  url: location.search,
  offsets: [...document.querySelectorAll('#msg-table tr.message')].map((r) => Number(r.dataset.offset)),
  keys: [...document.querySelectorAll('#msg-table tr.message')].map((r) => r.dataset.key),
  values: [...document.querySelectorAll('#msg-table td.value')].map((td) => td.textContent),
  key_cells: [...document.querySelectorAll('#msg-table td.key')].map((td) => td.textContent),
  headers: [...document.querySelectorAll('#msg-table td.headers')].map((td) => td.textContent),
  status: { ...document.getElementById('msg-status').dataset },
  view: { ...document.getElementById('partition-view').dataset },
  focus: window.floodmarkState.snapshot ? window.floodmarkState.snapshot.focus : undefined,
  changed_ms: Number(document.getElementById('updated').dataset.changedMs || 0),
  topic_hws: Object.fromEntries([...document.querySelectorAll('#topics-table tr.topic-partition')]
    .map((r) => [`${r.dataset.topic}-${r.dataset.partition}`, r.dataset.highWatermark])),
})"""


def _wait_rows(page: Any, pred: Any, what: str) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def check() -> bool:
        nonlocal last
        last = page.evaluate(READ_ROWS)
        return bool(pred(last))

    try:
        wait_until(check, 20, what, step_s=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the page shows {last}") from None
    return last


def test_message_browser_and_urls(cluster: LocalCluster, tmp_path: Path) -> None:
    base_ms = _fill(cluster.bootstrap)
    with run_ui(tmp_path / "ui.log", "--data-dir", str(cluster.data_dir),
                "--interval-ms", "250") as url, sync_api.sync_playwright() as pw:
        # The JSON API: bad queries are one line each; a bounded key search says where it
        # stopped.
        status, answer = _get(f"{url}api/messages?topic=nope&partition=0")
        assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in answer["error"], answer
        status, answer = _get(f"{url}api/messages?topic={TOPIC}&partition=x")
        assert status == 400 and "\n" not in answer["error"], answer
        status, answer = _get(f"{url}api/messages?topic={TOPIC}&partition=1&offset=0"
                              "&key=k3&scan_max_records=10")
        assert status == 200, answer
        assert [r["offset"] for r in answer["records"]] == [3, 8]
        assert (answer["scanned"], answer["next_offset"], answer["scan_complete"]) == (
            10, 10, False)

        browser = pw.chromium.launch(executable_path=chromium(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            # No URL: the page opens on the first non-empty partition (orders-1, not the
            # empty orders-0), writes it into the URL, shows its newest records and asks the
            # brokers for that partition only.
            page.goto(url)
            state = _wait_rows(page, lambda s: len(s["offsets"]) == COUNT
                               and s["view"].get("partition") == "1"
                               and s["focus"] == [[TOPIC, 1]],
                               "orders-1's 30 records, the partition drawn and polled alone")
            assert state["url"] == f"?topic={TOPIC}&partition=1"
            assert state["offsets"] == list(range(COUNT))
            assert state["keys"] == [f"k{i % 5}" for i in range(COUNT)]
            assert state["values"][0] == '{"n": 0}'
            assert state["headers"][0] == "source: test"
            assert state["status"]["hw"] == str(COUNT)
            # The rule itself (issue 24's fix), on made-up snapshots: a troubled partition
            # first (under-replicated or offline, even empty), else the first holding records
            # (by the leader's HW, or a replica's LEO where no HW was read), user topics first.
            picks = page.evaluate("""() => [
              defaultPartition({ partitions: [], topics: [
                { topic: "__consumer_offsets", internal: true, partitions: [
                  { partition: 0, offline: true, under_replicated: true, high_watermark: 0 }] },
                { topic: "a", internal: false, partitions: [
                  { partition: 0, high_watermark: 0 }, { partition: 1, high_watermark: 5 },
                  { partition: 2, under_replicated: true, high_watermark: 0 }] }] }),
              defaultPartition({ partitions: [], topics: [
                { topic: "__consumer_offsets", internal: true, partitions: [
                  { partition: 0, high_watermark: 9 }] },
                { topic: "a", internal: false, partitions: [
                  { partition: 0, high_watermark: 0 }, { partition: 1, high_watermark: 5 }] }] }),
              defaultPartition({ topics: [{ topic: "a", internal: false, partitions: [
                  { partition: 0, high_watermark: null }, { partition: 1, high_watermark: null }] }],
                partitions: [{ topic: "a", partition: 1, replicas: [{ log_end_offset: 3 }] }] }),
            ]""")
            assert picks == [{"topic": "a", "partition": 2}, {"topic": "a", "partition": 1},
                             {"topic": "a", "partition": 1}]

            # JSON and hex renderings of the same records.
            page.select_option("#msg-format", "json")
            state = _wait_rows(page, lambda s: s["status"].get("format") == "json", "JSON")
            assert json.loads(state["values"][7]) == {"n": 7} and "\n" in state["values"][7]
            page.select_option("#msg-format", "hex")
            state = _wait_rows(page, lambda s: s["status"].get("format") == "hex", "hex")
            assert state["key_cells"][0] == "6b 30"  # "k0"
            assert "format=hex" in state["url"]

            # A key search: every record whose key contains k3, the whole log read.
            page.select_option("#msg-format", "text")
            page.fill("#msg-key", "k3")
            page.click("#msg-load")
            state = _wait_rows(page, lambda s: s["offsets"] == list(range(3, COUNT, 5)),
                               "the records with key k3")
            assert state["status"]["scanned"] == str(COUNT)
            assert state["status"]["complete"] == "true"
            assert "key=k3" in state["url"]
            search_url = url + state["url"]

            # A new record moves "last changed" (the change, not a poll).
            before_ms = int(time.time() * 1000)
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
            p.produce(TOPIC, key=b"k9", value=b"late", partition=1)
            assert p.flush(30) == 0
            state = _wait_rows(page, lambda s: s["view"].get("highWatermark") == str(COUNT + 1),
                               "the new record's HW on the page")
            assert state["changed_ms"] >= before_ms - 1000, (state["changed_ms"], before_ms)
            # The topics table's HW column: the leaders' high watermarks.
            state = _wait_rows(page, lambda s: s["topic_hws"].get(f"{TOPIC}-1") == str(COUNT + 1),
                               "orders-1's HW in the topics table")
            assert state["topic_hws"][f"{TOPIC}-0"] == "0"

            # A URL per view: each link opens the same view in a fresh page.
            other = browser.new_page()
            other.on("pageerror", lambda exc: errors.append(str(exc)))
            other.goto(search_url)
            state = _wait_rows(other, lambda s: s["offsets"] == list(range(3, COUNT, 5)),
                               "the key search, from its URL")
            other.goto(f"{url}?topic={TOPIC}&partition=1&from=timestamp"
                       f"&ts={base_ms + 20_000}&limit=5")
            state = _wait_rows(other, lambda s: s["offsets"] == [20, 21, 22, 23, 24],
                               "5 records from record 20's timestamp (ListOffsets by time)")
            other.goto(f"{url}?topic={TOPIC}&partition=1&from=offset&offset=27&format=hex")
            state = _wait_rows(other, lambda s: s["offsets"] == [27, 28, 29, 30],
                               "the records from offset 27, in hex")
            assert state["key_cells"][-1] == "6b 39"
            assert other.eval_on_selector("#msg-format", "e => e.value") == "hex"

            # Started without --allow-changes: no button that changes the cluster, and every
            # change answers 403 in one line (test_changes.py has them with the flag).
            assert page.evaluate("""() => ({
              create: document.getElementById('create-topic').hidden,
              reset: document.getElementById('reset-offsets').hidden,
              buttons: document.querySelectorAll('button.drill, button.delete-topic').length,
              allowed: document.body.dataset.allowChanges })""") == {
                "create": True, "reset": True, "buttons": 0, "allowed": "false"}
            for path, body, headers in (
                    ("topics/create", {"topic": "other"}, {}),
                    ("topics/delete", {"topic": TOPIC}, {}),
                    ("groups/reset-offsets", {"group": "g", "mode": "earliest"}, {}),
                    ("drill", {"broker": 1, "action": "kill"}, {"X-Floodmark-Drill": "1"})):
                code, answer = _post(f"{url}api/{path}", body, headers)
                assert code == 403 and "--allow-changes" in answer["error"], (path, answer)
                assert "\n" not in answer["error"]
            assert cluster.node_state(1) == "running"
            assert not errors, errors
        finally:
            browser.close()
