"""The dashboard draws the controller quorum of a local cluster (issue 14: "controllers, quorum
state when it exists"): the leader, its epoch and HW, each voter's LEO and lag, read from the
page in a real headless chromium and compared with what the controllers themselves answer
(``LocalCluster.quorum``, DescribeQuorum); after the active controller is SIGKILLed the page
shows the new leader in a higher epoch. Waits on what the page shows, bounded."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until
from tests.ui.conftest import chromium, run_ui

pytestmark = pytest.mark.integration

READ_QUORUM = """() => {
  const q = document.getElementById("quorum");
  if (!q) return null;
  const voters = {};
  for (const v of q.querySelectorAll(".voter")) {
    voters[v.dataset.voter] = {leo: v.dataset.leo, lag: v.dataset.lag};
  }
  return {leader: q.dataset.leader, epoch: q.dataset.epoch, hw: q.dataset.hw, voters};
}"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", 1, controllers=3).start()
    try:
        yield c
    finally:
        c.stop()


def _wait_page(page: sync_api.Page, ok: Any, what: str, timeout_s: float = 60) -> Any:
    seen: list[Any] = [None]

    def check() -> bool:
        seen[0] = page.evaluate(READ_QUORUM)
        return seen[0] is not None and bool(ok(seen[0]))

    wait_until(check, timeout_s, f"{what} (page shows {seen[0]})")
    return seen[0]


def test_dashboard_draws_the_controller_quorum(cluster: LocalCluster, tmp_path: Path) -> None:
    first = cluster.wait_active_controller(60)
    with run_ui(tmp_path / "ui.log", "--data-dir", str(cluster.data_dir),
                "--interval-ms", "250") as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            shown = _wait_page(page, lambda q: q["leader"] == str(first)
                               and len(q["voters"]) == 3, f"controller {first} leading 3 voters")
            truth = cluster.quorum()
            assert int(shown["epoch"]) == truth["leader_epoch"]
            assert sorted(shown["voters"]) == sorted(str(v["voter_id"])
                                                     for v in truth["voters"])
            # Each voter's LEO as drawn never runs ahead of the leader's log, and the HW drawn
            # is one the leader had (both only grow; the page is at most one poll behind).
            for v in shown["voters"].values():
                assert v["leo"] != "" and 0 <= int(v["leo"]) <= max(
                    int(x["log_end_offset"]) for x in cluster.quorum()["voters"])
            assert 0 < int(shown["hw"]) <= int(cluster.quorum()["high_watermark"])
            # The active controller dies: the page follows the election.
            cluster.kill(first, signal.SIGKILL)
            after = _wait_page(page, lambda q: q["leader"] not in ("", str(first))
                               and int(q["epoch"] or -1) > int(shown["epoch"]),
                               "a new quorum leader in a higher epoch")
            assert int(after["leader"]) in cluster.controller_ids
            dead = after["voters"][str(first)]
            assert dead["lag"] == "" or int(dead["lag"]) >= 0
            page.screenshot(path=str(tmp_path / "quorum.png"))
            assert errors == []
        finally:
            browser.close()
