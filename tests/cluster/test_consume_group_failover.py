"""Issue 22: ``floodmark consume --group`` through a SIGKILL of its group's coordinator, then
Ctrl-C.

Before: the heartbeat died with ``OSError: [Errno 9] Bad file descriptor`` (a 34-line
traceback), a restarted cluster gave ``RuntimeError: JoinGroup failed: error 16``, and Ctrl-C sent
no LeaveGroup (the group stayed Stable with a dead member for its session timeout). Now the
command follows the coordinator (FindCoordinator again on a lost connection, NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS), prints every record, never a
traceback, and on Ctrl-C commits and leaves: the group is Empty at once, its committed offsets at
the end of every partition."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import REPO, start_cluster, wait_progress, wait_until

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS, GROUP = "lines", 3, "cli-group"
SESSION_S = 10.0  # the command's session timeout (client/group.py): Empty sooner means LeaveGroup


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def _produce(bootstrap: str, first: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000, "reconnect.backoff.max.ms": 500})
    for i in range(first, first + count):
        p.produce(TOPIC, value=f"line-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0


def test_consume_group_follows_its_coordinator_and_leaves_on_ctrl_c(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "consume-group-cluster")
    proc: subprocess.Popen[bytes] | None = None
    out_path, err_path = tmp_path / "consume.out", tmp_path / "consume.err"
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_until(lambda: all(cluster.leader_of(TOPIC, p) > 0 for p in range(PARTITIONS)),
                   30, "leaders")
        _produce(cluster.bootstrap, 0, 300)
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "floodmark.cli", "consume", TOPIC, "--group", GROUP,
                 "--from-beginning", "--bootstrap-server", cluster.bootstrap],
                stdout=out, stderr=err, cwd=str(REPO))

        def printed() -> int:
            assert proc is not None
            assert proc.poll() is None, (proc.returncode, err_path.read_text())
            return len(_lines(out_path))

        wait_progress(lambda: printed() >= 300, printed, 60, "the first 300 lines printed")
        coordinator = cluster.leader_of("__consumer_offsets", 0)
        cluster.kill(coordinator)
        _produce(cluster.bootstrap, 300, 300)  # while the coordinator is down
        wait_progress(lambda: printed() >= 600, printed, 90, "lines produced after the kill")
        cluster.start_node(coordinator)
        wait_until(lambda: cluster.leader_of("__consumer_offsets", 0) == coordinator, 90,
                   "the coordinator back on the restarted broker", progress=printed)
        _produce(cluster.bootstrap, 600, 300)
        wait_progress(lambda: printed() >= 900, printed, 90, "lines produced after the restart")

        proc.send_signal(signal.SIGINT)  # Ctrl-C
        code = proc.wait(30)
        err = err_path.read_text(errors="replace")
        assert "Traceback" not in err, err
        assert code == 130, (code, err)
        # At once, well within the session timeout: the member left (LeaveGroup).
        described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert described.state == ConsumerGroupState.EMPTY, described
        assert not described.members

        lines = _lines(out_path)
        assert sorted(set(lines)) == sorted(f"line-{i}" for i in range(900)), \
            f"{len(lines)} lines, {len(set(lines))} distinct"
        request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, p)
                                                       for p in range(PARTITIONS)])
        committed = admin.list_consumer_group_offsets([request])[GROUP].result(10)
        assert {tp.partition: tp.offset for tp in committed.topic_partitions} == \
            {p: 300 for p in range(PARTITIONS)}
        print(f"consume --group printed {len(lines)} lines ({len(set(lines))} distinct) through "
              f"a SIGKILL of coordinator {coordinator}; Ctrl-C left the group Empty")
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        cluster.stop()

