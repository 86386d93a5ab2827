"""The simulator's reference scenarios replayed in the dashboard's own drawing (headless Debian
chromium via playwright): choose a scenario and a truncation mode, step forward and back, and the
page shows, step by step, each replica's LEO, HW and epoch cache exactly as the simulator
recorded them. No cluster is needed (the live part of the page just says it cannot reach one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api

from floodmark.replication.modes import Truncation
from floodmark.sim.partition.scenarios import run_scenario
from tests.ui.conftest import chromium, run_ui

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
]

READ_SIM = """() => {
  const rows = {};
  for (const row of document.querySelectorAll("#sim-replicas .replica")) {
    rows[row.dataset.broker] = { leo: Number(row.dataset.leo), hw: Number(row.dataset.hw),
      epochs: JSON.parse(row.dataset.epochs), alive: row.dataset.alive,
      labels: [...row.querySelectorAll(".offset-label")].map((t) => t.textContent) };
  }
  return { index: Number(document.getElementById("sim-step").dataset.index), rows,
           verdict: document.getElementById("sim-verdict").textContent,
           leader: document.getElementById("sim-view").dataset.leader };
}"""


@pytest.fixture
def ui_url(tmp_path: Path) -> Iterator[str]:
    with run_ui(tmp_path / "ui.log", "--bootstrap", "127.0.0.1:9") as url:
        yield url


def _expected(step: dict[str, Any]) -> dict[str, tuple[int, int, list[list[int]]]]:
    return {b: (r["leo"], r["hw"], [list(e) for e in r["epochs"]])
            for b, r in step["replicas"].items()}


def test_scenario_replay_steps_forward_and_back(ui_url: str, tmp_path: Path) -> None:
    name, mode = "hw-truncation-data-loss", Truncation.HIGH_WATERMARK
    truth = run_scenario(name, mode)
    steps = truth.steps  # what each replica held after every step, as the simulator recorded

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(ui_url)
            page.wait_for_selector("#sim-replicas .replica")
            page.select_option("#sim-scenario", name)
            page.select_option("#sim-truncation", mode.value)
            # the choice is fetched asynchronously: wait until the page shows this very replay
            page.wait_for_function(
                "(([n, m]) => { const s = document.getElementById('sim-step').dataset;"
                " return s.scenario === n && s.truncation === m; })",
                arg=[name, mode.value])

            def shown() -> dict[str, Any]:
                result: dict[str, Any] = page.evaluate(READ_SIM)
                return result

            def check(index: int) -> None:
                page.wait_for_function(
                    f"document.getElementById('sim-step').dataset.index === '{index}'")
                state = shown()
                got = {b: (r["leo"], r["hw"], r["epochs"]) for b, r in state["rows"].items()}
                assert got == _expected(steps[index]), (index, steps[index]["event"])
                assert state["leader"] == str(steps[index]["leader"] or -1)

            page.click("#sim-first")
            check(0)
            for i in range(1, len(steps)):
                page.click("#sim-next")
                check(i)
            page.screenshot(path=str(tmp_path / "scenario-last-step.png"), full_page=True)
            final = shown()
            assert "lost" in final["verdict"] and "m2" in final["verdict"], final["verdict"]
            # the records themselves are drawn: the boxes carry the produced values
            assert "m1" in final["rows"][truth.final_leader]["labels"]
            for i in range(len(steps) - 2, len(steps) - 5, -1):
                page.click("#sim-prev")
                check(i)
            # a URL per view: the replay, its mode and its step are in the address, and the
            # address opens that very step in a fresh page
            search = page.evaluate("location.search")
            assert f"scenario={name}" in search and f"step={len(steps) - 3}" in search, search
            again = browser.new_page(viewport={"width": 1400, "height": 1400})
            again.on("pageerror", lambda exc: errors.append(str(exc)))
            again.goto(ui_url + search)
            again.wait_for_function(
                "(([n, m, i]) => { const s = document.getElementById('sim-step').dataset;"
                " return s.scenario === n && s.truncation === m && s.index === i; })",
                arg=[name, mode.value, str(len(steps) - 4)])
            assert not errors, errors
        finally:
            browser.close()
