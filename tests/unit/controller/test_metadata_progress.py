"""When each broker applied the metadata, and when the controller committed it (issue 11's
metadata propagation figures): the broker's image keeps (next offset, wall-clock ms) of its
latest advances, stamped after the broker acted on them; its heartbeat carries them; the
controller's ``status`` lists them per broker beside its own commit times. A malformed report is
ignored and the heartbeat is still answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from floodmark.controller.client import APPLIED_KEPT, ControllerClient
from floodmark.controller.logic import ControllerConfig
from floodmark.controller.server import ControllerServer


def _register(server: ControllerServer, broker_id: int) -> int:
    answer = server.call("register", {"broker_id": broker_id, "host": "127.0.0.1",
                                      "port": 9000 + broker_id, "incarnation": f"i{broker_id}"})
    return int(answer["result"]["broker_epoch"])


def test_a_broker_reports_when_it_applied_each_offset(tmp_path: Path) -> None:
    server = ControllerServer(str(tmp_path), ControllerConfig())
    epoch = _register(server, 1)
    client = ControllerClient("127.0.0.1:1", 1)
    seen_during_callback: list[int] = []
    client.on_records = lambda _recs: seen_during_callback.append(len(client.applied))
    records = server.call("status", {"from_offset": 0})["result"]["records"]
    client.apply_records(records)
    client.apply_records(records)  # nothing new: no new entry
    assert seen_during_callback == [0]  # stamped after the broker acted on them
    assert [offset for offset, _ in client.applied] == [server.image.next_offset]
    progress = client.metadata_progress()
    assert progress["metadata_offset"] == server.image.next_offset

    server.call("heartbeat", {"broker_id": 1, "broker_epoch": epoch, **progress})
    status = server.call("status", {})["result"]
    broker = status["brokers"][0]
    assert broker["metadata_offset"] == server.image.next_offset
    assert broker["metadata_applied"] == [list(e) for e in client.applied]
    ends = [end for end, _ in status["metadata_commits"]]
    assert ends and ends == sorted(set(ends)) and ends[-1] == status["metadata_offset"]
    client.close()
    server.mlog.close()


def test_the_history_is_bounded(tmp_path: Path) -> None:
    client = ControllerClient("127.0.0.1:1", 1)
    for offset in range(APPLIED_KEPT * 2):
        client.apply_records([[offset, {"type": "cluster_id", "cluster_id": "c"}]])
    assert len(client.applied) == APPLIED_KEPT
    assert client.applied[-1][0] == APPLIED_KEPT * 2
    client.close()


def test_a_malformed_report_is_ignored_and_the_heartbeat_answered(tmp_path: Path) -> None:
    server = ControllerServer(str(tmp_path), ControllerConfig())
    epoch = _register(server, 1)
    bad: list[dict[str, Any]] = [
        {"metadata_offset": "7"}, {"metadata_offset": 3, "metadata_applied": "x"},
        {"metadata_offset": 3, "metadata_applied": [[1], ["a", 2], 5, [4, 9]]}]
    for report in bad:
        answer = server.call("heartbeat", {"broker_id": 1, "broker_epoch": epoch, **report})
        assert "result" in answer and answer["result"]["error"] == 0, answer
    broker = server.call("status", {})["result"]["brokers"][0]
    assert broker["metadata_offset"] == 3 and broker["metadata_applied"] == [[4, 9]]
    server.mlog.close()
