"""Several log directories per broker (JBOD, KIP-112 / KIP-113 / KIP-858) on a real broker
process with real clients: replicas spread over ``log.dirs``, DescribeLogDirs per directory
(kafka-python), everything read back after a restart, each directory locked and identified
(a partition found in two directories: tests/unit/storage/test_log_dirs.py); AlterReplicaLogDirs (kafka-python) moves a
partition while an idempotent producer writes to it, and nothing acknowledged is lost."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from floodmark.cli.main import main
from floodmark.storage.data_dir import DataDirLockedError, lock_data_dirs
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.compat

BROKER_ID = 1  # `floodmark broker`'s default node.id


def _start(data: Path, dirs: list[Path]) -> BrokerProcess:
    return BrokerProcess(data, ["--set", f"log.dirs={','.join(map(str, dirs))}"]).start()


def _describe(bootstrap: str) -> dict[str, dict[str, Any]]:
    """log dir -> {partition name: partition dict} (kafka-python's DescribeLogDirs)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        answer = admin.describe_log_dirs()
    finally:
        admin.close()
    [broker] = answer
    out: dict[str, dict[str, Any]] = {}
    for d in broker["log_dirs"]:
        assert d["error_code"] == 0, d
        assert d["total_bytes"] > 0 and d["usable_bytes"] > 0, d
        out[d["log_dir"]] = {f"{t['name']}-{p['partition_index']}": p
                             for t in d["topics"] for p in t["partitions"]}
    return out


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record, read from the beginning."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"jbod-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[tuple[int, int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                if msg.error() is None:
                    got.append((msg.partition(), msg.offset(), bytes(msg.value())))
    finally:
        c.close()
    return got


def test_partitions_spread_over_log_dirs_and_come_back_after_restart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d1, d2 = tmp_path / "disk1", tmp_path / "disk2"
    broker = _start(tmp_path / "data", [d1, d2])
    try:
        creator = AdminClient({"bootstrap.servers": broker.bootstrap})
        creator.create_topics([NewTopic("spread", 6, 1)])["spread"].result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                      "enable.idempotence": True})
        sent = {b"%d-%d" % (part, i) for part in range(6) for i in range(40)}
        for value in sorted(sent):
            p.produce("spread", value=value, partition=int(value.split(b"-")[0]))
        assert p.flush(30) == 0
        del p

        dirs = _describe(broker.bootstrap)
        assert set(dirs) == {str(d1.resolve()), str(d2.resolve())}
        where = {name: d for d, parts in dirs.items() for name in parts}
        named = [name for parts in dirs.values() for name in parts]
        assert len(named) == len(set(named)), "each partition in exactly one dir"
        assert {f"spread-{i}" for i in range(6)} <= set(where)
        # One file system: the directories tie on space, so they go by partition count
        # (__consumer_offsets-0 counts too).
        counts = sorted(len(parts) for parts in dirs.values())
        assert counts[1] - counts[0] <= 1, dirs
        for parts in dirs.values():
            for name, part in parts.items():
                assert part["offset_lag"] == 0 and not part["is_future_key"]
                assert part["partition_size"] > 0 or not name.startswith("spread")
        for name, d in where.items():
            assert (Path(d) / name).is_dir()
        ids = {(d / "meta.properties").read_text().split("directory.id=")[1].split()[0]
               for d in (d1, d2)}
        assert len(ids) == 2, "each log dir has its own directory.id"

        # `floodmark cluster log-dirs` shows both directories and where each partition is.
        capsys.readouterr()
        assert main(["cluster", "log-dirs", "--topic", "spread", "--json",
                     "--bootstrap-server", broker.bootstrap]) == 0
        [shown] = json.loads(capsys.readouterr().out)["brokers"]
        assert {d["logDir"]: sorted(p["partition"] for p in d["partitions"])
                for d in shown["logDirs"]} == {
            d: sorted(n for n in parts if n.startswith("spread")) for d, parts in dirs.items()}

        # The broker holds every log dir's lock: another process taking one is refused with
        # one line naming the broker's pid (this test process tries, as a second broker would).
        for d in (d1, d2):
            with pytest.raises(DataDirLockedError) as locked:
                lock_data_dirs([str(tmp_path / "other"), str(d)])
            assert f"pid {broker.proc.pid if broker.proc else '?'}" in str(locked.value)
            assert "\n" not in str(locked.value)

        broker.restart()
        got = _read_all(broker.bootstrap, "spread", 6, len(sent))
        assert {v for _, _, v in got} == sent and len(got) == len(sent)
        assert _describe(broker.bootstrap) == dirs  # every partition found where it was
    finally:
        broker.stop()


def test_alter_replica_log_dirs_moves_a_partition_under_load(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "disk1", tmp_path / "disk2"
    broker = _start(tmp_path / "data", [d1, d2])
    try:
        creator = AdminClient({"bootstrap.servers": broker.bootstrap})
        creator.create_topics([NewTopic("moving", 1, 1, config={"segment.bytes": "65536"})]
                              )["moving"].result(30)
        [source] = [d for d, parts in _describe(broker.bootstrap).items() if "moving-0" in parts]
        destination = next(str(d.resolve()) for d in (d1, d2) if str(d.resolve()) != source)

        acked: list[bytes] = []
        failed: list[str] = []
        stop = threading.Event()

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked.append(bytes(msg.value()))
            else:
                failed.append(str(err))

        def produce() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 2})
            deadline = time.monotonic() + 40
            for i in range(60_000):  # bounded in count and time
                if stop.is_set() or time.monotonic() > deadline:
                    break
                p.produce("moving", value=b"m%06d" % i + b"." * 200, partition=0,
                          on_delivery=on_delivery)
                p.poll(0)
                if i % 200 == 199:
                    time.sleep(0.01)
            p.flush(30)

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        deadline = time.monotonic() + 30
        while len(acked) < 3000 and time.monotonic() < deadline and not failed:
            time.sleep(0.05)
        assert len(acked) >= 3000, (len(acked), failed)

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
        try:
            answer = admin.alter_replica_log_dirs({("moving", 0, BROKER_ID): destination})
            assert [e.__name__ for e in answer.values()] == ["NoError"], answer
            # Not a log dir of this broker: LOG_DIR_NOT_FOUND.
            bad = admin.alter_replica_log_dirs({("moving", 0, BROKER_ID): str(tmp_path)})
            assert [e.__name__ for e in bad.values()] == ["LogDirNotFoundError"], bad
        finally:
            admin.close()

        # Progress: the partition reaches the destination while writes go on.
        moved_at = len(acked)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            dirs = _describe(broker.bootstrap)
            here = dirs[destination].get("moving-0")
            if here is not None and not here["is_future_key"] and "moving-0" not in dirs[source]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"the move did not finish: {dirs}")
        stop_after = len(acked) + 2000  # and keeps serving after the swap
        deadline = time.monotonic() + 30
        while len(acked) < stop_after and writer.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        writer.join(60)
        assert not writer.is_alive()
        assert not failed, failed[:3]
        assert len(acked) > moved_at

        got = _read_all(broker.bootstrap, "moving", 1, len(acked))
        assert [o for _, o, _ in got] == list(range(len(got))), "offsets contiguous"
        assert {v for _, _, v in got} >= set(acked), "every acknowledged record is there"
        assert not (Path(source) / "moving-0").exists()
        assert sorted(os.listdir(destination)).count("moving-0") == 1
        leftovers = [n for d in (d1, d2) for n in os.listdir(d) if n.endswith(("-future",
                                                                                "-delete"))]
        assert leftovers == []
        assert "replica moved to log dir" in broker.log_text()

        broker.restart()  # found in its new directory, every record still there
        again = _read_all(broker.bootstrap, "moving", 1, len(got))
        assert again == got
        assert "moving-0" in _describe(broker.bootstrap)[destination]
    finally:
        broker.stop()
