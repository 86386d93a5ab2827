"""The dashboard draws the last stable offset (issues 14 and 15), in headless Debian chromium.

Live: a confluent-kafka transactional producer opens a transaction on a real broker; the page
shows the LSO marker at the transaction's first offset, below the HW, the offsets between drawn
"committed, not yet stable", and ``GET /api/partitions`` carries ``last_stable_offset``; after
the commit the LSO reaches the HW and the marker goes away. Replay: ``transaction-visibility``
step by step shows the LSO exactly where the simulator recorded it below the HW."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from playwright import sync_api

from floodmark.client.replica_state import read_replica_state
from floodmark.replication.modes import DEFAULT_TRUNCATION
from floodmark.sim.partition.scenarios import run_scenario
from tests.cluster.helpers import wait_until
from tests.compat.txn_helpers import create_topic
from tests.ui.conftest import chromium, run_ui

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "lso-view"

READ_LSO = """(prefix) => {
  const view = document.getElementById(prefix + "view") || document.getElementById("partition-view");
  const rows = {};
  for (const row of document.querySelectorAll(`#${prefix}replicas .replica`)) {
    const marker = row.querySelector(".lso-marker");
    const boxes = [...row.querySelectorAll("rect.offset-box")];
    const line = marker.querySelector(".lso-line").getBoundingClientRect();
    const at = (o) => boxes.find((b) => Number(b.dataset.offset) === o);
    const lso = row.dataset.lso === "" || row.dataset.lso === undefined ? null : Number(row.dataset.lso);
    rows[row.dataset.broker] = {
      hw: Number(row.dataset.hw), lso,
      marker_shown: getComputedStyle(marker).display !== "none",
      marker_lso: marker.dataset.lso === undefined ? null : Number(marker.dataset.lso),
      marker_x: line.left + line.width / 2,
      box_left: lso !== null && at(lso) ? at(lso).getBoundingClientRect().left : null,
      unstable: boxes.filter((b) => b.classList.contains("unstable")).map((b) => Number(b.dataset.offset)),
    };
  }
  return { lso: view.dataset.lastStableOffset === undefined || view.dataset.lastStableOffset === ""
             ? null : Number(view.dataset.lastStableOffset),
           hw: Number(view.dataset.highWatermark), held: view.dataset.lsoHeld,
           leader: view.dataset.leader, rows,
           animating: document.getAnimations().length };
}"""


@pytest.fixture
def txn_broker(broker_factory: Callable[..., Any]) -> Any:
    return broker_factory(name="txnmore-lso")


@pytest.fixture
def browser_page() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page
            assert not errors, errors
        finally:
            browser.close()


def _read(page: Any, prefix: str = "") -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(READ_LSO, prefix)
    return result


def _wait(page: Any, pred: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def check() -> bool:
        nonlocal last
        last = _read(page)
        return bool(pred(last)) and last["animating"] == 0

    try:
        wait_until(check, 30, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the page shows {last}") from None
    return last


def _api_row(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}api/partitions", timeout=10) as resp:
        rows = [r for r in json.loads(resp.read()) if r["topic"] == TOPIC]
    assert len(rows) == 1
    return rows[0]


def test_dashboard_marks_the_lso_of_an_open_transaction(txn_broker: Any, browser_page: Any,
                                                        tmp_path: Path) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, TOPIC)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(5):
        plain.produce(TOPIC, value=b"plain-%d" % i, partition=0)
        plain.flush(30)  # offsets 0..4
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txnmore-lso-view",
                    "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(TOPIC, value=b"txn-%d" % i, partition=0)
    assert txn.flush(30) == 0  # offsets 5..7, the transaction open: LSO 5, HW 8

    with run_ui(tmp_path / "ui.log", "--bootstrap", bootstrap, "--interval-ms", "250") as url:
        page = browser_page
        page.goto(f"{url}?topic={TOPIC}&partition=0")
        state = _wait(page, lambda s: s["hw"] == 8 and s["lso"] == 5,
                      "HW 8 and LSO 5 on the page")
        truth = read_replica_state(bootstrap, TOPIC, 0, 0)
        assert (truth["high_watermark"], truth["last_stable_offset"]) == (8, 5)
        assert state["held"] == "true"
        row = state["rows"][state["leader"]]
        assert row["marker_shown"] and row["marker_lso"] == 5, row
        assert row["unstable"] == [5, 6, 7], row  # replicated, not yet readable committed
        assert row["box_left"] is not None and abs(row["marker_x"] - row["box_left"]) <= 2, row
        api = _api_row(url)
        assert api["last_stable_offset"] == 5
        assert [r["last_stable_offset"] for r in api["replicas"]] == [5]
        page.screenshot(path=str(tmp_path / "lso-open-transaction.png"), full_page=True)

        txn.commit_transaction(30)  # the COMMIT marker at 8: LSO = HW = 9
        state = _wait(page, lambda s: s["hw"] == 9 and s["lso"] == 9,
                      "the LSO at the HW (9) after the commit")
        row = state["rows"][state["leader"]]
        assert state["held"] == "false"
        assert not row["marker_shown"] and row["marker_lso"] is None and row["unstable"] == []
        assert _api_row(url)["last_stable_offset"] == 9
        page.screenshot(path=str(tmp_path / "lso-committed.png"), full_page=True)


def test_replay_of_transaction_visibility_draws_the_lso(browser_page: Any, tmp_path: Path
                                                        ) -> None:
    name = "transaction-visibility"
    steps = run_scenario(name, DEFAULT_TRUNCATION).steps
    held = [i for i, s in enumerate(steps) if any(
        r.get("leo", -1) >= 0 and r.get("lso") is not None and r["lso"] < r["hw"]
        for r in s["replicas"].values())]
    assert held, "the scenario never holds the LSO below the HW"
    with run_ui(tmp_path / "ui.log", "--bootstrap", "127.0.0.1:9") as url:
        page = browser_page
        page.goto(url)
        page.wait_for_selector("#sim-replicas .replica")
        page.select_option("#sim-scenario", name)
        page.wait_for_function(
            "(n) => document.getElementById('sim-step').dataset.scenario === n", arg=name)
        page.click("#sim-first")
        for index, step in enumerate(steps):
            if index:
                page.click("#sim-next")
            page.wait_for_function(
                f"document.getElementById('sim-step').dataset.index === '{index}'")
            rows = _read(page, "sim-")["rows"]
            for broker, r in step["replicas"].items():
                if r.get("leo", -1) < 0:
                    continue
                shown = rows[broker]
                below = r.get("lso") is not None and r["lso"] < r["hw"]
                assert shown["lso"] == r["lso"], (index, broker, shown, r)
                assert shown["marker_shown"] == below, (index, broker, shown, r)
                if below:
                    assert shown["marker_lso"] == r["lso"], (index, broker)
                    assert shown["unstable"] == list(range(r["lso"], r["hw"])), (index, broker)
            if index == held[0]:
                page.wait_for_function("document.getAnimations().length === 0")
                page.screenshot(path=str(tmp_path / "replay-lso.png"), full_page=True)
