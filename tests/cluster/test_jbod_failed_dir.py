"""JBOD (KIP-112 / KIP-113 / KIP-858) on a real 3-broker cluster (RF=3) with confluent-kafka
and kafka-python. Each broker tells the controller which log directory holds each replica
(AssignReplicasToDirs); a failed log directory takes only its replicas offline: the leader's
directory holding one partition disappears (renamed away, as an unmounted disk); that broker
stays up, names the directory in its heartbeat, the controller finds its replicas by their
recorded directories and moves the partition's leadership to another broker, the partitions in its other directory keep being served by it, and every acknowledged
record is read back. AlterReplicaLogDirs moves a follower's replica under load, and the
metadata records its new directory."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import (
    SESSION_TIMEOUT_MS,
    AckLog,
    acked_more,
    producer_thread,
    wait_until,
)


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % partitions)
    assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod-failed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: set[bytes] = set()
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                if msg.error() is None:
                    got.add(bytes(msg.value()))
    finally:
        c.close()
    return got


def _log_dirs(bootstrap: str, broker: int) -> dict[str, dict[str, Any]]:
    """log dir -> {"error_code", "partitions": set of names} on one broker."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        [answer] = admin.describe_log_dirs(brokers=[broker])
    finally:
        admin.close()
    return {d["log_dir"]: {"error_code": d["error_code"],
                           "partitions": {f"{t['name']}-{p['partition_index']}"
                                          for t in d["topics"] for p in t["partitions"]}}
            for d in answer["log_dirs"]}


def _directories_recorded(cluster: LocalCluster, disks: Path, topic: str,
                          partitions: int) -> bool:
    """Every replica's log directory id (its ``meta.properties``) is the one the controller's
    metadata records for it (AssignReplicasToDirs, KIP-858)."""
    for p in range(partitions):
        reg = cluster.partition_registration(topic, p)
        if reg is None:
            return False
        for broker, recorded in zip(reg["replicas"], reg["directories"], strict=True):
            homes = [d for d in disks.glob(f"b{broker}-?") if (d / f"{topic}-{p}").is_dir()]
            if not homes:
                return False  # not opened there yet (a broker opens new logs off its loop)
            [home] = homes
            props = dict(line.split("=", 1) for line in
                         (home / "meta.properties").read_text().splitlines() if "=" in line)
            if props["directory.id"] != recorded:
                return False
    return True


def _mount_disks(disks: Path) -> dict[str, Path]:
    """Every broker's every log dir on a disk of its own: an ext4 filesystem on a loop device
    whose backing file is a sparse image on a small tmpfs (thin provisioning). Filling that
    tmpfs breaks the disk under the filesystem: its writes and fsyncs fail although ext4 still
    reports free space. Returns log dir -> its backing tmpfs."""
    if os.geteuid() != 0:
        pytest.skip("mounting filesystems needs root")
    backing: dict[str, Path] = {}
    for node in (1, 2, 3):
        for name in ("a", "b"):
            path, back = disks / f"b{node}-{name}", disks / f"back-{node}-{name}"
            path.mkdir(parents=True)
            back.mkdir()
            steps = [["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(back)],
                     ["truncate", "-s", "64M", str(back / "disk.img")],
                     ["mkfs.ext4", "-q", "-F", str(back / "disk.img")],
                     ["mount", "-o", "loop,errors=remount-ro", str(back / "disk.img"), str(path)]]
            for i, step in enumerate(steps):
                done = subprocess.run(step, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    if i > 0:
                        backing[str(path)] = back
                    _unmount(backing)
                    pytest.skip(f"cannot mount a loop filesystem here: {done.stderr.strip()}")
            backing[str(path)] = back
    return backing


def _unmount(backing: dict[str, Path]) -> None:
    for path, back in backing.items():
        subprocess.run(["umount", "-l", path], check=False, capture_output=True)
        subprocess.run(["umount", "-l", str(back)], check=False, capture_output=True)


def _break(back: Path) -> None:
    """Fill the disk's backing store: the filesystem above it can no longer write."""
    try:
        with open(back / "filler", "wb") as f:
            for _ in range(64):
                f.write(b"\0" * (1 << 20))
    except OSError:
        pass  # full: the disk is broken


@pytest.mark.parametrize("how", ["unmounted", "broken"])
def test_a_failed_log_dir_moves_only_its_leaderships(tmp_path: Path, how: str) -> None:
    """``unmounted``: the directory disappears (renamed away). ``broken``: every log dir is a
    filesystem of its own that the test mounts, and the failing one's disk breaks under it
    (``_break``): the broker finds out at its next write (an append or a checkpoint)."""
    disks = tmp_path / "disks"
    mounted = _mount_disks(disks) if how == "broken" else {}
    cluster = LocalCluster(
        tmp_path / "c", 3,
        {"replica.lag.time.max.ms": "2000",
         "log.dirs": f"{disks}/b{{node_id}}-a,{disks}/b{{node_id}}-b"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("fail", 4, 3)])["fail"].result(30)
        # Each broker told the controller which of its directories holds each replica.
        wait_until(lambda: _directories_recorded(cluster, disks, "fail", 4), 20,
                   "every replica's log directory recorded in the metadata")
        first = [b"before-%d" % i for i in range(200)]
        _produce(cluster.bootstrap, "fail", first, 4)

        leader = cluster.leader_of("fail", 0)
        dirs = _log_dirs(cluster.bootstrap, leader)
        [failing] = [d for d, info in dirs.items() if "fail-0" in info["partitions"]]
        [other] = [d for d in dirs if d != failing]
        gone = {p for p in dirs[failing]["partitions"] if p.startswith("fail-")}
        kept_led = [p for p in range(4) if f"fail-{p}" in dirs[other]["partitions"]
                    and cluster.leader_of("fail", p) == leader]

        if how == "unmounted":
            Path(failing).rename(Path(failing + ".unmounted"))  # the disk is gone
        else:
            _break(mounted[failing])

        def moved() -> bool:
            return all(cluster.leader_of("fail", int(p.rsplit("-", 1)[1])) not in (leader, -1)
                       for p in gone)
        wait_until(moved, 20, f"leadership of {sorted(gone)} off broker {leader}")
        for p in gone:
            reg = cluster.partition_registration("fail", int(p.rsplit("-", 1)[1]))
            assert reg is not None and leader not in reg["isr"], reg
        # Its other directory keeps serving: the partitions it led there are still its own.
        assert [p for p in kept_led if cluster.leader_of("fail", p) == leader] == kept_led
        after = _log_dirs(cluster.bootstrap, leader)
        assert after[failing]["error_code"] == 56  # KAFKA_STORAGE_ERROR
        assert after[other]["error_code"] == 0 and after[other]["partitions"]
        assert f"log dir {failing} failed" in cluster.log_path(leader).read_text(
            errors="replace")

        second = [b"after-%d" % i for i in range(200)]
        _produce(cluster.bootstrap, "fail", second, 4)
        got = _read_all(cluster.bootstrap, "fail", 4, len(first) + len(second))
        assert got == set(first) | set(second), "every acknowledged record is there"
        [node] = [n for n in cluster.status()["nodes"] if n["id"] == leader]
        assert node["state"] == "running" and not node["fenced"], node  # still up, unfenced
    finally:
        cluster.stop()
        _unmount(mounted)
    # ... and it stops cleanly too (its other directory marked clean, nothing raised).
    text = cluster.log_path(leader).read_text(errors="replace")
    assert "Traceback" not in text and "closed cleanly" in text


def _log_bytes(partition_dir: Path) -> bytes:
    """The replica's whole log: its segment files in offset order, concatenated."""
    return b"".join(seg.read_bytes() for seg in sorted(partition_dir.glob("*.log")))


def test_a_follower_moves_between_its_log_dirs_under_load(tmp_path: Path) -> None:
    """AlterReplicaLogDirs on a follower while an idempotent acks=all producer writes: the
    replica keeps fetching across the swap, stays (or comes back) in the ISR, and its log is
    byte for byte the leader's; every acknowledged record is read back."""
    disks = tmp_path / "disks"
    cluster = LocalCluster(
        tmp_path / "c", 3,
        {"replica.lag.time.max.ms": "2000",
         "log.dirs": f"{disks}/b{{node_id}}-a,{disks}/b{{node_id}}-b"},
        {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)}).start()
    acks = AckLog()
    stop = threading.Event()
    writer = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("fmove", 1, 3, config={"segment.bytes": "65536"})]
                            )["fmove"].result(30)
        writer = producer_thread(cluster.bootstrap, "fmove", acks, stop)
        acked_more(acks, 0, by=2000)
        leader = cluster.leader_of("fmove", 0)
        follower = next(b for b in cluster.broker_ids if b != leader)
        dirs = _log_dirs(cluster.bootstrap, follower)
        [source] = [d for d, info in dirs.items() if "fmove-0" in info["partitions"]]
        [target] = [d for d in dirs if d != source]
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
        try:
            answer = kp.alter_replica_log_dirs({("fmove", 0, follower): target})
        finally:
            kp.close()
        assert [e.__name__ for e in answer.values()] == ["NoError"], answer

        def moved() -> bool:
            now = _log_dirs(cluster.bootstrap, follower)
            return ("fmove-0" in now[target]["partitions"]
                    and "fmove-0" not in now[source]["partitions"]
                    and not (Path(source) / "fmove-0").exists())
        wait_until(moved, 30, f"fmove-0 moved to {target} on broker {follower}",
                   progress=acks.count)
        acked_more(acks, acks.count(), by=1000)  # writes go on after the swap
        stop.set()
        writer.join(120)
        assert not acks.failed, acks.failed[:3]

        def in_sync() -> bool:
            reg = cluster.partition_registration("fmove", 0)
            return reg is not None and sorted(reg["isr"]) == sorted(cluster.broker_ids)
        wait_until(in_sync, 30, "every replica in the ISR")
        got = _read_all(cluster.bootstrap, "fmove", 1, acks.count())
        assert {v for _, v in acks.acked} <= got, "every acknowledged record is there"
        leader_dirs = _log_dirs(cluster.bootstrap, leader)
        [leader_dir] = [d for d, info in leader_dirs.items() if "fmove-0" in info["partitions"]]

        def same_log() -> bool:
            return (_log_bytes(Path(target) / "fmove-0")
                    == _log_bytes(Path(leader_dir) / "fmove-0"))
        wait_until(same_log, 30, "the moved follower's log equal to the leader's")
        # The controller's metadata follows the move (AssignReplicasToDirs).
        wait_until(lambda: _directories_recorded(cluster, disks, "fmove", 1), 20,
                   "the moved replica's new log directory recorded in the metadata")
    finally:
        stop.set()
        if writer is not None:
            writer.join(60)
        cluster.stop()
    text = cluster.log_path(follower).read_text(errors="replace")
    assert "replica moved to log dir" in text and "Traceback" not in text
