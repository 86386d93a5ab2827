"""``floodmark ui`` in a real browser against a real 3-broker cluster.

Debian's ``chromium``, driven by playwright (pointed at /usr/bin/chromium: no browser download),
opens the dashboard while records are produced, both followers are paused (SIGSTOP: the leader's
LEO runs ahead of its HW, the offsets in between are uncommitted) and then the leader is killed
(SIGKILL, with the page's fault-drill button and its confirmation; the dashboard runs with
``--allow-changes``: a new leader, a new leader epoch, the ISR shrinks). At every stable point
the values
are read FROM THE PAGE (the data attributes of the drawn HW marker, dashed LEO box and offset
boxes) and compared with what each broker reports itself (``client.replica_state.replica_state``, the
debug reads of ``floodmark cluster describe``). Screenshots: ``<tmp_path>/artifacts``; the
paused-followers one becomes ``docs/img/dashboard.png`` (the README's figure) when that file is
missing or ``FLOODMARK_UPDATE_SCREENSHOT=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api

from floodmark.client.replica_state import read_replica_state
from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until
from tests.ui.conftest import REPO, chromium, run_ui

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
]

TOPIC = "dashboard"
# Long enough that a paused follower stays in the ISR (and registered) while the page is read:
# the page must show the leader's LEO ahead of its HW before the paused followers are fenced (a
# 4 s window at 6 s failed once at load 10, the page still animating the HW when it closed).
SESSION_TIMEOUT_MS = 12000
LAG_TIME_MAX_MS = 15000

# Everything the page shows about the chosen partition, read from its data attributes.
READ_PAGE = """() => {
  const view = document.getElementById("partition-view");
  const rows = {};
  for (const row of document.querySelectorAll("#replicas .replica")) {
    const leoBox = row.querySelector(".leo-marker .leo-box");
    const hw = row.querySelector(".hw-marker");
    const boxes = [...row.querySelectorAll("rect.offset-box")];
    const at = (o) => boxes.find((b) => Number(b.dataset.offset) === o);
    const hwValue = Number(row.dataset.hw), leoValue = Number(row.dataset.leo);
    const last = at(leoValue - 1);
    const leoRect = leoBox.getBoundingClientRect();
    const hwRect = hw.querySelector(".hw-line").getBoundingClientRect();
    rows[row.dataset.broker] = {
      role: row.dataset.role, alive: row.dataset.alive, in_isr: row.dataset.inIsr,
      leo: row.dataset.leo === "" ? null : leoValue,
      hw: row.dataset.hw === "" ? null : hwValue,
      epochs: JSON.parse(row.dataset.epochs || "[]"),
      leo_box_offset: leoBox.dataset.offset === undefined ? null : Number(leoBox.dataset.offset),
      leo_box_dashed: getComputedStyle(leoBox).strokeDasharray,
      hw_marker: hw.dataset.hw === undefined ? null : Number(hw.dataset.hw),
      committed: boxes.filter((b) => b.classList.contains("committed")).map((b) => Number(b.dataset.offset)),
      uncommitted: boxes.filter((b) => b.classList.contains("uncommitted")).map((b) => Number(b.dataset.offset)),
      // geometry: the dashed box sits right after the last record, the HW line at the
      // boundary between committed and uncommitted boxes
      leo_box_after_last: last ? leoRect.left >= last.getBoundingClientRect().right - 0.5 : null,
      hw_x: hwRect.left + hwRect.width / 2,
      hw_box_left: at(hwValue) ? at(hwValue).getBoundingClientRect().left : null,
      hw_prev_right: at(hwValue - 1) ? at(hwValue - 1).getBoundingClientRect().right : null,
    };
  }
  const remote = {};
  for (const td of document.querySelectorAll("#remote-leos .remote-leo-value")) {
    remote[td.dataset.broker] = Number(td.dataset.leo);
  }
  const row = document.querySelector(`#topics-table tr[data-topic="${view.dataset.topic}"]` +
                                     `[data-partition="${view.dataset.partition}"]`);
  const groups = {};
  for (const tr of document.querySelectorAll("#groups-table tr.group-offset")) {
    groups[`${tr.dataset.group}/${tr.dataset.topic}-${tr.dataset.partition}`] = {
      committed: Number(tr.dataset.committed), lag: Number(tr.dataset.lag),
      state: tr.dataset.state };
  }
  return {
    groups,
    leader: Number(view.dataset.leader), leader_epoch: Number(view.dataset.leaderEpoch),
    isr: view.dataset.isr ? view.dataset.isr.split(",").map(Number) : [],
    log_start_offset: Number(view.dataset.logStartOffset), rows, remote,
    under_replicated: row ? row.dataset.underReplicated : null,
    renders: Number(document.body.dataset.renders || 0),
    animating: document.getAnimations().length,
  };
}"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", 3, {"replica.lag.time.max.ms": str(LAG_TIME_MAX_MS)},
                     {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                      "auto.leader.rebalance.enable": "false"}).start()
    try:
        yield c
    finally:
        for b in c.broker_ids:  # never leave a paused broker behind
            if c.node_state(b) == "stopped":
                os.kill(c.pid(b) or 0, signal.SIGCONT)
        c.stop()


@pytest.fixture
def ui_url(cluster: LocalCluster, tmp_path: Path) -> Iterator[str]:
    with run_ui(tmp_path / "ui.log", "--data-dir", str(cluster.data_dir), "--interval-ms",
                "250", "--allow-changes") as url:  # the fault-drill buttons
        yield url


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        return json.loads(resp.read())


def _check_api(ui_url: str, cluster: LocalCluster, tmp_path: Path) -> None:
    """GET /api/partitions keeps the issue's contract, and ``--bootstrap`` (any cluster, found
    through Metadata) serves the same partitions as ``--data-dir`` (the controller's view)."""
    rows = [r for r in _get_json(f"{ui_url}api/partitions") if r["topic"] == TOPIC]
    assert len(rows) == 1
    row = rows[0]
    # The keys, the LSO (transactions) and the KIP-966 ELR; more may be added.
    assert set(row) == {"topic", "partition", "leader", "leader_epoch", "isr",
                        "log_start_offset", "replicas", "remote_log_end_offsets",
                        "last_stable_offset", "elr"}
    assert row["last_stable_offset"] == 30  # no transaction: the LSO is the HW
    for r in row["replicas"]:
        assert set(r) == {"broker", "log_end_offset", "high_watermark", "epochs",
                          "last_stable_offset"}
        assert r["epochs"] == [[0, 0]]
    assert row["remote_log_end_offsets"] == {str(b): 30 for b in cluster.broker_ids
                                             if b != row["leader"]}
    cluster_view = _get_json(f"{ui_url}api/cluster")
    assert cluster_view["controller"]["alive"] is True
    assert [b["id"] for b in cluster_view["brokers"] if b["alive"]] == cluster.broker_ids
    topics = {t["topic"]: t for t in _get_json(f"{ui_url}api/topics")}
    assert topics[TOPIC]["under_replicated"] == 0
    with run_ui(tmp_path / "ui-bootstrap.log", "--bootstrap", cluster.bootstrap,
                "--interval-ms", "250") as other:
        again = wait_until(lambda: [r for r in _get_json(f"{other}api/partitions")
                                    if r["topic"] == TOPIC], 20, "the --bootstrap UI's data")
        assert again == rows


def _produce(bootstrap: str, first: int, count: int, acks: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "message.timeout.ms": 30000})
    failed: list[str] = []
    for i in range(first, first + count):
        p.produce(TOPIC, value=b"record-%d" % i, partition=0,
                  on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
        p.flush(30)  # one record per batch: one offset box each, in order
    assert p.flush(30) == 0 and not failed, failed


def _consume_and_commit(bootstrap: str, group: str, count: int) -> None:
    """A real consumer group member reads ``count`` records and commits its position."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([TOPIC])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < count and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen >= count, seen
        c.commit(offsets=[TopicPartition(TOPIC, 0, count)], asynchronous=False)
    finally:
        c.close()


def _page_state(page: Any) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(READ_PAGE)
    return result


def _assert_page_matches_brokers(state: dict[str, Any], cluster: LocalCluster,
                                 brokers: list[int]) -> None:
    """Each live replica's drawing equals what its broker reports about itself right now."""
    for b in brokers:
        truth = read_replica_state(cluster.address(b), TOPIC, 0, state["leader_epoch"])
        row = state["rows"][str(b)]
        leo, hw = truth["log_end_offset"], truth["high_watermark"]
        assert (row["leo"], row["hw"]) == (leo, hw), (b, row, truth)
        assert row["leo_box_offset"] == leo and row["hw_marker"] == hw, (b, row)
        assert row["leo_box_dashed"] not in ("", "none"), row
        assert row["epochs"] == truth["epoch_cache"], (b, row, truth)
        # offsets below the HW are drawn committed, HW..LEO-1 uncommitted, nothing at the LEO
        assert row["uncommitted"] == list(range(hw, leo)), (b, row)
        assert row["committed"] and max(row["committed"]) == hw - 1, (b, row)
        if leo > 0:
            assert row["leo_box_after_last"] is True, (b, row)
        if row["hw_prev_right"] is not None:
            assert row["hw_x"] >= row["hw_prev_right"] - 2, (b, row)
        if row["hw_box_left"] is not None:
            assert row["hw_x"] <= row["hw_box_left"] + 2, (b, row)
        assert state["log_start_offset"] == truth["log_start_offset"]


def _wait_page(page: Any, pred: Any, what: str, timeout_s: float = 30.0) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def check() -> bool:
        nonlocal last
        last = _page_state(page)
        # read positions only once the markers stopped moving (transitions, highlights)
        return bool(pred(last)) and last["animating"] == 0

    try:
        wait_until(check, timeout_s, what, step_s=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the page shows {last}") from None
    return last


def test_dashboard_draws_hw_leo_and_isr_live(cluster: LocalCluster, ui_url: str,
                                             tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    started = time.monotonic()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 1, 3,
                                             config={"min.insync.replicas": "2"})]).values():
        fut.result(30)
    wait_until(lambda: cluster.leader_of(TOPIC) > 0, 30, "a leader for the topic")
    leader = cluster.leader_of(TOPIC)
    followers = [b for b in cluster.broker_ids if b != leader]

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{ui_url}?topic={TOPIC}&partition=0")

            # 1. acks=all: every replica holds 30 records, all committed.
            _produce(cluster.bootstrap, 0, 30, "all")
            state = _wait_page(page, lambda s: len(s["rows"]) == 3 and all(
                r["leo"] == 30 and r["hw"] == 30 for r in s["rows"].values())
                and all(v == 30 for v in s["remote"].values()) and len(s["remote"]) == 2,
                "every replica at LEO 30 and HW 30 on the page")
            assert state["leader"] == leader
            assert sorted(state["isr"]) == cluster.broker_ids
            assert state["under_replicated"] == "false"
            _assert_page_matches_brokers(state, cluster, cluster.broker_ids)
            page.screenshot(path=str(artifacts / "1-all-committed.png"), full_page=True)
            _check_api(ui_url, cluster, tmp_path)

            # A consumer group committed at 20 of 30: the page shows a lag of 10.
            _consume_and_commit(cluster.bootstrap, "dashboard-readers", 20)
            state = _wait_page(page, lambda s: s["groups"].get(f"dashboard-readers/{TOPIC}-0",
                                                               {}).get("lag") == 10,
                               "the group's committed offset 20 and lag 10 on the page")
            assert state["groups"][f"dashboard-readers/{TOPIC}-0"]["committed"] == 20
            groups = {g["group"]: g for g in _get_json(f"{ui_url}api/groups")}
            assert groups["dashboard-readers"]["offsets"] == [
                {"topic": TOPIC, "partition": 0, "committed_offset": 20, "high_watermark": 30,
                 "lag": 10}]

            # 2. Followers paused, acks=1: the leader's LEO runs ahead of its HW; the offsets in
            #    between are drawn uncommitted, and the leader still sees its followers at 30.
            for b in followers:
                cluster.kill(b, signal.SIGSTOP)
            try:
                _produce(cluster.address(leader), 30, 8, "1")
                state = _wait_page(page, lambda s: s["rows"][str(leader)]["leo"] == 38
                                   and s["rows"][str(leader)]["hw"] == 30,
                                   "the leader at LEO 38, HW 30",
                                   timeout_s=SESSION_TIMEOUT_MS / 1000 - 3)
                _assert_page_matches_brokers(state, cluster, [leader])
                assert state["rows"][str(leader)]["uncommitted"] == list(range(30, 38))
                assert state["remote"] == {str(b): 30 for b in followers}
                page.wait_for_timeout(500)  # let the HW/LEO animation settle for the picture
                page.screenshot(path=str(artifacts / "2-followers-paused.png"), full_page=True)
            finally:
                for b in followers:
                    cluster.kill(b, signal.SIGCONT)
            state = _wait_page(page, lambda s: all(
                r["leo"] == 38 and r["hw"] == 38 for r in s["rows"].values()),
                "the followers caught up: LEO = HW = 38 everywhere")
            _assert_page_matches_brokers(state, cluster, cluster.broker_ids)

            # 3. SIGKILL the leader: a new leader (leader epoch 1), the ISR shrinks, the old
            #    leader's row goes dark, the topics table says under-replicated.
            #    The kill is the page's own fault-drill button (POST /api/drill).
            page.click(f"#broker-{leader} button[data-drill='kill']")
            page.click("#confirm-yes")  # "kill broker N?"
            page.wait_for_selector("#drill-status[data-ok='true']", timeout=30_000)
            assert cluster.wait_dead(leader, 10), "the drill did not kill the leader"
            state = _wait_page(page, lambda s: s["leader"] in followers and s["leader_epoch"] >= 1
                               and leader not in s["isr"], "a new leader and a smaller ISR",
                               timeout_s=SESSION_TIMEOUT_MS / 1000 + 20)
            assert len(state["isr"]) == 2 and state["under_replicated"] == "true"
            assert state["rows"][str(leader)]["alive"] == "false"
            new_leader = state["leader"]
            _produce(cluster.bootstrap, 38, 12, "all")
            live = [b for b in cluster.broker_ids if b != leader]
            state = _wait_page(page, lambda s: all(
                s["rows"][str(b)]["leo"] == 50 and s["rows"][str(b)]["hw"] == 50 for b in live),
                "the live replicas at LEO 50 and HW 50")
            _assert_page_matches_brokers(state, cluster, live)
            epoch = state["leader_epoch"]
            assert state["rows"][str(new_leader)]["epochs"][-1] == [epoch, 38]
            page.screenshot(path=str(artifacts / "3-leader-killed.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()
    readme_figure = REPO / "docs" / "img" / "dashboard.png"
    if os.environ.get("FLOODMARK_UPDATE_SCREENSHOT") or not readme_figure.exists():
        readme_figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(artifacts / "2-followers-paused.png", readme_figure)
    assert time.monotonic() - started < 120
