"""Shared machinery for the multi-process cluster tests: a ``LocalCluster`` fixture, a producer
thread that records every acknowledgement, and checks that read the replicas' segment files."""

from __future__ import annotations

import hashlib
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from floodmark.cluster import LocalCluster, waiting
from floodmark.cluster.waiting import LIMIT_S
from floodmark.records import decode_batch, iter_batches

SESSION_TIMEOUT_MS = 1500


def wait_until(pred: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.1, *,
               progress: Callable[[], Any] | None = None) -> Any:
    """Wait until ``pred()``. With ``progress``, ``timeout_s`` is how long that may stay the
    same before the wait fails (``wait_progress``); without, a plain bound, for waits whose
    duration is what the test checks."""
    if progress is not None:
        return wait_progress(pred, progress, timeout_s, what, step_s=step_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def wait_progress(done: Callable[[], Any], progress: Callable[[], Any], stall_s: float,
                  what: str, *, limit_s: float = LIMIT_S, step_s: float = 0.2) -> Any:
    """Wait until ``done()``; fail only when ``progress()`` has not changed for ``stall_s`` (or,
    as a bound, after ``limit_s`` in all), so a busy machine slows the test but does not fail it.
    """
    try:
        return waiting.wait_progress(done, lambda: {"progress": progress()}, what=what,
                                     stall_ms=int(stall_s * 1000), limit_s=limit_s,
                                     step_s=step_s)
    except waiting.Stalled as exc:
        raise AssertionError(str(exc)) from None


def cluster_progress(cluster: LocalCluster) -> dict[str, object]:
    """What a working cluster moves: every node's CPU time and log size (``wait_until``'s
    ``progress`` for waits on the cluster as a whole)."""
    values: dict[str, object] = {}
    for node_id in cluster.node_ids:
        pid = cluster.pid(node_id)
        if pid is not None:
            values.update(waiting.process_progress(pid, cluster.log_path(node_id)))
    return values


def metadata_brokers(address: str) -> tuple[set[int], int] | None:
    """The broker ids one broker's Metadata answer lists, and its ``controller_id`` (None: it
    did not answer)."""
    from floodmark.client.connection import KafkaConnection, RequestFailed

    try:
        with KafkaConnection(address, timeout_s=5) as conn:
            meta = conn.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    except (OSError, RequestFailed):
        return None
    return {int(b.node_id) for b in meta.brokers}, int(meta.controller_id)


REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``floodmark ARGS...`` as a user runs it (a new process, from the repository)."""
    return subprocess.run([sys.executable, "-m", "floodmark.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=str(REPO))


def cli_ok(*args: str) -> str:
    """``run_cli`` that must succeed; its stdout."""
    out = run_cli(*args)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout


def one_line_error(out: subprocess.CompletedProcess[str], needle: str) -> None:
    """The command failed with one line on stderr naming ``needle``, and no traceback."""
    assert out.returncode != 0, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr


def voter_caught_up(cluster: LocalCluster, voter: int) -> bool:
    """The voter follows another leader and its LEO reached the leader's HW (lag 0)."""
    q = cluster.quorum()
    v = next((v for v in q["voters"] if v["voter_id"] == voter), None)
    return (q["leader_id"] not in (None, voter) and v is not None and v["lag"] == 0
            and v["log_end_offset"] >= q["high_watermark"])


def dir_bytes(path: Path) -> int:
    """Bytes of the files in a partition directory (0 while it does not exist)."""
    return sum(f.stat().st_size for f in path.glob("*") if f.is_file()) if path.exists() else 0


def start_cluster(data_dir: Path, brokers: int = 3, *, metrics: bool = False,
                  broker_settings: Mapping[str, str] | None = None,
                  **controller: str) -> LocalCluster:
    """A cluster for a test; ``metrics``: every node serves /metrics (off unless the test reads
    them: loading prometheus_client and serving costs each node about 0.15 s of CPU);
    ``broker_settings``: more settings of every broker."""
    settings = {"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "leader.imbalance.check.interval.ms": "3000", **controller}
    return LocalCluster(data_dir, brokers,
                        {"replica.lag.time.max.ms": "2000", **(broker_settings or {})},
                        settings, metrics=metrics).start()


def replica_batches(cluster: LocalCluster, node_id: int, topic: str,
                    partition: int = 0) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, exact bytes) of every batch in the replica's segment files."""
    out = []
    for seg in sorted(cluster.partition_dir(node_id, topic, partition).glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_batches(data, validate=False):
            out.append((h.base_offset, h.last_offset, bytes(data[pos:pos + h.size])))
    return out


def replica_values(cluster: LocalCluster, node_id: int, topic: str,
                   partition: int = 0) -> dict[int, bytes | None]:
    values: dict[int, bytes | None] = {}
    for _base, _last, raw in replica_batches(cluster, node_id, topic, partition):
        _h, records = decode_batch(raw, validate=False)
        for r in records:
            values[r.offset] = r.value
    return values


def prefix_below(batches: list[tuple[int, int, bytes]], hw: int) -> bytes:
    return b"".join(raw for _b, last, raw in batches if last < hw)


def log_digest(cluster: LocalCluster, node_id: int, topic: str) -> str:
    h = hashlib.sha256()
    for _b, _l, raw in replica_batches(cluster, node_id, topic):
        h.update(raw)
    return h.hexdigest()


def isr_full(cluster: LocalCluster, topic: str) -> bool:
    """Every replica is back in the ISR (caught up to the HW under the leader's rules); cheap
    enough to poll while a producer is writing."""
    reg = cluster.partition_registration(topic)
    return bool(reg and sorted(reg["isr"]) == cluster.broker_ids and reg["leader"] > 0)


def healed(cluster: LocalCluster, topic: str) -> bool:
    """Full ISR, and every replica's segment files hold the same batches."""
    reg = cluster.partition_registration(topic)
    if reg is None or sorted(reg["isr"]) != cluster.broker_ids or reg["leader"] < 0:
        return False
    digests = {log_digest(cluster, b, topic) for b in cluster.broker_ids}
    return len(digests) == 1


class AckLog:
    """Acknowledged (offset, value) pairs and failed sends, filled by a producer's callbacks."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, bytes]] = []
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def ok(self, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked.append((offset, value))

    def error(self, what: str) -> None:
        with self.lock:
            self.failed.append(what)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


FAST_QUORUM_SETTINGS = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "500",
    "broker.session.timeout.ms": "3000",
}
"""Quorum timeouts short enough for a drill to elect within a second (the drills' common base)."""


def acked_more(acks: AckLog, than: int, by: int = 100, stall_s: float = 60.0) -> None:
    """Wait for ``by`` more acknowledgements than ``than``; fails only when none arrives for
    ``stall_s`` (a failover pauses them)."""
    wait_progress(lambda: acks.count() >= than + by, acks.count, stall_s,
                  f"{by} more acknowledgements (have {acks.count()}, failed {acks.failed[:2]})",
                  step_s=0.05)


def producer_thread(bootstrap: str, topic: str, acks: AckLog, stop: threading.Event
                    ) -> threading.Thread:
    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acks.ok(msg.offset(), msg.value())  # type: ignore[attr-defined]
        else:
            acks.error(str(err))

    def run() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                      "enable.idempotence": True, "message.timeout.ms": 120000,
                      "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 300,
                      "topic.metadata.refresh.interval.ms": 1000,
                      "retry.backoff.ms": 50,
                      # A SIGSTOPped leader never answers: give up on it well before 30 s.
                      "request.timeout.ms": 4000, "socket.timeout.ms": 4000})
        i = 0
        while not stop.is_set() and i < 2_000_000:
            try:
                p.produce(topic, value=b"v%09d" % i, partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 20 == 0:
                p.poll(0.005)  # bounded rate: a few thousand values per second
        remaining = p.flush(120)
        if remaining:
            acks.error(f"{remaining} message(s) still in flight after flush")

    t = threading.Thread(target=run, name="producer", daemon=True)
    t.start()
    return t


def consumer_thread(bootstrap: str, topic: str, seen: dict[int, bytes],
                    stop: threading.Event) -> threading.Thread:
    def run() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watcher",
                      "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                seen[msg.offset()] = msg.value()
        c.close()

    t = threading.Thread(target=run, name="consumer", daemon=True)
    t.start()
    return t


def high_watermark(c: Consumer, topic: str, partition: int = 0, timeout_s: float = 45) -> int:
    """The partition's HW as `c` sees it, retried while the answer is a retriable error: the
    local cluster's preferred-leader election (auto.leader.rebalance.enable, every 10 s) may move
    the leadership between the metadata a client has and its ListOffsets. A leader just elected
    answers OFFSET_NOT_AVAILABLE until its HW caught up (KIP-207): retriable in Kafka, though
    librdkafka does not flag it so here."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _lo, hw = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            return int(hw)
        except KafkaException as e:
            err = e.args[0]
            again = err.retriable() or err.code() == KafkaError.OFFSET_NOT_AVAILABLE
            if not again or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def verify_after_healing(cluster: LocalCluster, topic: str, acks: AckLog,
                         seen: dict[int, bytes]) -> int:
    """The checks of the fault tests; returns the HW."""
    # A fresh consumer reads everything below the HW.
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "verify",
                  "enable.auto.commit": False})
    hw = high_watermark(c, topic)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    fresh: dict[int, bytes] = {}

    def read_all() -> bool:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            assert msg.offset() not in fresh, "an offset delivered twice"
            fresh[msg.offset()] = msg.value()
        return len(fresh) >= hw

    try:  # fails only when the read stops moving, not on a busy machine's slowness
        wait_progress(read_all, lambda: len(fresh), 30, f"a fresh consumer to read 0..{hw - 1}",
                      step_s=0)
    finally:
        c.close()
    assert sorted(fresh) == list(range(hw)), "fresh consumer did not read 0..HW-1"

    # Every acknowledged value at its acknowledged offset; values unique (idempotence).
    assert not acks.failed, acks.failed[:5]
    assert len(acks.acked) > 700
    for offset, value in acks.acked:
        assert fresh.get(offset) == value, f"acked {value!r}@{offset} lost"
    values = list(fresh.values())
    assert len(values) == len(set(values)), "duplicates with an idempotent producer"
    # The concurrent consumer only ever saw committed records, at their final offsets.
    assert seen, "the watcher saw nothing"
    for offset, value in seen.items():
        assert offset < hw and fresh.get(offset) == value, (offset, value)

    # Replica logs identical below the HW (segment bytes), and each decodes to `fresh`.
    batches = {b: replica_batches(cluster, b, topic) for b in cluster.broker_ids}
    prefixes = {b: prefix_below(bs, hw) for b, bs in batches.items()}
    assert len(set(prefixes.values())) == 1, "replica logs differ below the HW"
    for b in cluster.broker_ids:
        vals = replica_values(cluster, b, topic)
        assert all(vals.get(o) == v for o, v in fresh.items())
    return hw


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 10.0) -> None:
    """SIGTERM a process the test started; SIGKILL it if it has not ended in ``timeout_s``."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


class LogLines(logging.Handler):
    """Every message logged to the logger it is added to (the broker's own debug lines, read by
    tests that check what a component did)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def replicated_round_trip(conf: dict[str, str], topic: str, value: bytes,
                          producer: dict[str, Any] | None = None, count: int = 20) -> None:
    """Create ``topic`` (1 partition, RF 2, min.insync.replicas 2), produce ``count`` keyed
    records acks=all (so the follower must have fetched them) and read them back in order,
    every client with ``conf`` (a secured cluster's client settings)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 2, config={"min.insync.replicas": "2"})])[
        topic].result(30)
    p = Producer({**conf, "acks": "all", **(producer or {})})
    for i in range(count):
        p.produce(topic, key=str(i).encode(), value=value)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes | None] = []
    while len(got) < count:
        msg = c.poll(30)
        assert msg is not None and msg.error() is None
        got.append(msg.key())
    c.close()
    assert got == [str(i).encode() for i in range(count)]
