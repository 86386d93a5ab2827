"""Metadata snapshots (KIP-630) on three real controller processes: every voter snapshots and
cuts its metadata log; a voter restarted with its data dir deleted is told (SnapshotId) that
the log it asks for is gone, loads the leader's snapshot chunk by chunk (FetchSnapshot), then
fetches the log after it — and is a working voter again (the quorum needs it once the active
controller is killed). Topics created before all still exist."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from floodmark.address import parse_host_port
from floodmark.controller import rpc
from tests.cluster.helpers import stop_process, wait_until
from tests.cluster.test_controller_quorum import Quorum
from tests.conftest import REPO

pytestmark = pytest.mark.integration

SNAPSHOTS = ("--metadata-log-segment-bytes", "4096",
             "--metadata-log-max-record-bytes-between-snapshots", "3000")


class Heartbeats:
    """A (fake) broker's heartbeats on one long-lived connection, as a real broker keeps: a
    connection closed after each call would read as the broker's process gone (fenced)."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.address = ""
        self.last_error: dict[str, Any] = {}

    def beat(self, address: str, args: dict[str, Any]) -> dict[str, Any]:
        """The heartbeat's answer; an error (e.g. a controller that is no longer, or not yet,
        the active one: on a loaded machine leadership can move again) reads as still fenced,
        so the waiting caller asks again until its bound."""
        if address != self.address:
            self.close()
            host, port = parse_host_port(address, min_port=1)
            self.sock = socket.create_connection((host, port), timeout=15)
            self.address = address
        assert self.sock is not None
        self.sock.sendall(rpc.encode({"id": 1, "method": "heartbeat", "args": args}))
        head = self.sock.recv(4, socket.MSG_WAITALL)
        (size,) = struct.unpack(">I", head)
        answer: dict[str, Any] = json.loads(self.sock.recv(size, socket.MSG_WAITALL))
        if "result" not in answer:
            self.last_error = answer
            return {"fenced": True}
        return dict(answer["result"])

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            self.address = ""


def test_a_voter_that_lost_its_data_dir_catches_up_from_a_snapshot(tmp_path: Path) -> None:
    q = Quorum(tmp_path, extra_args=SNAPSHOTS)
    nodes = [1, 2, 3]
    beats = Heartbeats()
    broker: subprocess.Popen[bytes] | None = None
    try:
        for node in nodes:
            q.start(node)
        first = wait_until(lambda: q.active(nodes), 30, "an active controller")
        epoch_b = q.call(first, "register", {"broker_id": 1, "host": "127.0.0.1", "port": 1,
                                             "incarnation": "snap11"})["result"]["broker_epoch"]

        def unfenced(node: int) -> None:
            try:
                wait_until(lambda: not beats.beat(q.address(node), {
                    "broker_id": 1, "broker_epoch": epoch_b})["fenced"], 10,
                    "the broker unfenced")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; last error answer: {beats.last_error}") from None

        def create(node: int, names: list[str]) -> None:
            for i, name in enumerate(names):
                if i % 10 == 0:  # keep the (fake) broker unfenced: RF=1 needs one
                    unfenced(node)
                for _attempt in range(5):
                    answer = q.call(node, "create_topic", {"name": name, "num_partitions": 2,
                                                           "replication_factor": 1})
                    # A loaded machine can let the fake broker's session lapse between
                    # beats (INVALID_REPLICATION_FACTOR, 38: no broker): beat, try again.
                    if "result" in answer or answer.get("error") != 38:
                        break
                    unfenced(node)
                assert "result" in answer, answer

        before = [f"before-{i}" for i in range(60)]
        create(first, before)

        def snapshotted(node: int) -> bool:
            d = q.describe(node)
            return bool(d and d["snapshot_end_offset"] and d["log_start_offset"] > 0)

        wait_until(lambda: all(snapshotted(n) for n in nodes), 30,
                   "every voter snapshotted and cut its log")
        victim = next(n for n in nodes if n != first)
        q.procs[victim].send_signal(signal.SIGKILL)
        q.procs[victim].wait(10)
        shutil.rmtree(tmp_path / f"controller-{victim}")
        middle = [f"middle-{i}" for i in range(20)]
        create(first, middle)
        leader_view = q.describe(first)
        assert leader_view is not None and leader_view["log_start_offset"] > 0

        q.start(victim)
        wait_until(lambda: set(before + middle) <= set(
            q.call(victim, "status", {})["result"]["topics"]), 60, "the wiped voter caught up")
        text = (tmp_path / f"controller-{victim}.log").read_text()
        assert "loaded snapshot" in text and "from the leader" in text, text[-2000:]
        assert list((tmp_path / f"controller-{victim}" / "__cluster_metadata-0").glob(
            "*.checkpoint"))
        view = q.describe(victim)
        assert view is not None and view["log_start_offset"] > 0  # restarted at the snapshot

        # A new broker pulls metadata from offset 0, below every controller's log start: it is
        # sent the snapshot, then the records after it, and serves every topic to a client.
        from confluent_kafka.admin import AdminClient

        log = (tmp_path / "broker-2.log").open("ab")
        broker = subprocess.Popen(
            [sys.executable, "-m", "floodmark.broker.cluster_member", "--node-id", "2",
             "--controller", ",".join(q.address(n) for n in nodes),
             "--data-dir", str(tmp_path / "broker-2"), "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=log, cwd=str(REPO),
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        log.close()
        assert broker.stdout is not None
        line = broker.stdout.readline().decode()
        assert "listening on" in line, line
        admin = AdminClient({"bootstrap.servers": line.strip().rsplit(" ", 1)[-1]})
        wait_until(lambda: set(before + middle) <= set(admin.list_topics(timeout=10).topics),
                   30, "the new broker serving every topic")

        # The wiped voter is a voter again: without the active controller, the two others
        # (one of them the wiped one) elect a leader and commit.
        q.procs[first].send_signal(signal.SIGKILL)
        q.procs[first].wait(10)
        rest = [n for n in nodes if n != first]
        second = wait_until(lambda: q.active(rest), 30, "a new active controller", step_s=0.05)
        create(second, ["after"])
        for node in rest:
            wait_until(lambda node=node: set(before + middle + ["after"]) <= set(  # type: ignore[misc]
                q.call(node, "status", {})["result"]["topics"]), 30, "every topic on the rest")
    finally:
        if broker is not None:
            stop_process(broker)
            if broker.stdout is not None:
                broker.stdout.close()
        beats.close()
        q.stop_all()
