"""An active controller that loses the quorum's leadership keeps its image when every record it
decided is committed (no O(partitions) rebuild on the loop at that moment), and drops the
uncommitted ones (rebuilt from the log's committed records) otherwise."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from floodmark.controller.logic import ControllerConfig
from floodmark.controller.quorum.effects import RoleChanged
from floodmark.controller.server import ControllerServer


def _active_with_records(tmp_path: Path) -> ControllerServer:
    server = ControllerServer(str(tmp_path), ControllerConfig())
    for broker_id in (1, 2, 3):
        server.call("register", {"broker_id": broker_id, "host": "127.0.0.1",
                                 "port": 9000 + broker_id, "incarnation": f"i{broker_id}"})
    answer = server.call("create_topic", {"name": "t", "num_partitions": 6,
                                          "replication_factor": 3})
    assert "result" in answer, answer
    assert server.logic is not None and "t" in server.image.topics
    assert server.image.next_offset == server.records_end
    return server


def _deposed(server: ControllerServer, high_watermark: int) -> None:
    """The quorum (stand-in: only what ``_on_role`` reads) says another voter leads now."""
    server.quorum = SimpleNamespace(  # type: ignore[assignment]
        core=SimpleNamespace(high_watermark=high_watermark, is_leader=False))
    server._on_role(RoleChanged(role="follower", epoch=2, leader_id=7))


def test_everything_committed_keeps_the_image(tmp_path: Path) -> None:
    server = _active_with_records(tmp_path)
    image, end = server.image, server.records_end
    _deposed(server, end)
    assert server.logic is None
    assert server.image is image  # not rebuilt
    assert server.image.next_offset == server.records_end == end
    server.mlog.close()


def test_uncommitted_records_are_dropped_by_a_rebuild(tmp_path: Path) -> None:
    server = _active_with_records(tmp_path)
    image, end = server.image, server.records_end
    committed = end - 2  # the last two records were never committed
    _deposed(server, committed)
    assert server.logic is None
    assert server.image is not image
    assert server.image.next_offset <= committed  # (the uncommitted two gone)
    server.mlog.close()
