"""Quix Streams' exactly-once mode against a 3-broker floodmark cluster (issue 15).

A real ``quixstreams`` application (``count_app.py``, run with the separate Quix virtualenv's
Python: quixstreams pins confluent-kafka below the version floodmark's tests use) counts its
input per key with ``processing_guarantee="exactly-once"``: its state changelog, its output and
its consumer offsets go into one transaction per checkpoint. Mid-run the broker leading an output
partition is SIGKILLed, input keeps coming, and the broker is started again; then the app itself
is SIGKILLed mid-transaction and started again (its aborted output stays in the log, marked
aborted). The output read with
``isolation.level=read_committed`` must count every input exactly once: for each key the counts
are 1, 2, ..., n in offset order, carrying the key's input ids in the order they were produced
(nothing lost, nothing doubled, no aborted attempt visible)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster, wait_progress, wait_until

pytestmark = pytest.mark.integration

SOURCE, SINK = "quix-in", "quix-out"
PARTITIONS = 3
KEYS = 12
APP = Path(__file__).with_name("count_app.py")
MAX_APP_STARTS = 5


def quix_python() -> Path:
    """The Quix virtualenv's Python: $FLOODMARK_QUIX_PYTHON, else ``.venv-quix`` beside the venv
    running the tests (``./dev setup`` makes it)."""
    env = os.environ.get("FLOODMARK_QUIX_PYTHON")
    return Path(env) if env else Path(sys.prefix).parent / ".venv-quix" / "bin" / "python"


class Output:
    """Every record of the output topic as a read_committed consumer sees it, per partition in
    offset order."""

    def __init__(self, bootstrap: str) -> None:
        self.records: dict[int, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(bootstrap,), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "quix-check",
                      "enable.auto.commit": False, "isolation.level": "read_committed",
                      "topic.metadata.refresh.interval.ms": 1000,
                      "reconnect.backoff.max.ms": 500})
        c.assign([TopicPartition(SINK, p, 0) for p in range(PARTITIONS)])
        try:
            while not self.stop.is_set():
                for m in c.consume(500, 0.2):
                    if m.error() is not None:
                        if not m.error().retriable() and m.error().code() != -191:  # EOF
                            self.errors.append(str(m.error()))
                        continue
                    with self.lock:
                        self.records[m.partition()].append((m.offset(), json.loads(m.value())))
        finally:
            c.close()

    def count(self) -> int:
        with self.lock:
            return sum(len(r) for r in self.records.values())

    def by_key(self) -> dict[str, list[tuple[int, str]]]:
        """(n, input id) of each output record per key, in offset order."""
        out: dict[str, list[tuple[int, str]]] = defaultdict(list)
        with self.lock:
            for records in self.records.values():
                for _offset, v in records:
                    out[v["key"]].append((int(v["n"]), str(v["id"])))
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


class QuixApp:
    """The Quix application as a child process; started again (bounded) if it exits, as a
    supervisor would restart it."""

    def __init__(self, bootstrap: str, work: Path, session_timeout_ms: int = 6000) -> None:
        self.args = [str(quix_python()), str(APP), bootstrap, SOURCE, SINK, str(work / "state"),
                     str(session_timeout_ms)]
        self.log_path = work / "quix-app.log"
        self.starts = 0
        self.exits: list[int] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.starts += 1
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def supervise(self) -> None:
        assert self.proc is not None
        code = self.proc.poll()
        if code is None:
            return
        self.exits.append(code)
        assert self.starts < MAX_APP_STARTS, f"the app exited {self.exits}: {self.tail()}"
        self.start()

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL mid-transaction; the next start's InitProducerId fences and aborts it."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _produce(p: Producer, first: int, count: int, sent: dict[str, list[str]],
             pause_every: int = 0) -> None:
    """``count`` inputs; with ``pause_every``, a 10 ms pause after each that many (a steady
    trickle, so the app is inside a transaction whenever it is killed)."""
    failed: list[str] = []
    for i in range(first, first + count):
        key = f"k{i % KEYS}"
        p.produce(SOURCE, key=key, value=str(i),
                  on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
        sent[key].append(str(i))
        p.poll(0)
        if pause_every and i % pause_every == 0:
            p.flush(10)
            threading.Event().wait(0.01)
    assert p.flush(120) == 0 and not failed, failed[:3]


def input_producer(bootstrap: str) -> Producer:
    """The input's idempotent producer, riding over leader changes."""
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": 120000,
                     "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000})


def assert_counted_once(output: Output, sent: dict[str, list[str]], about: str) -> None:
    """Per key, the output's counts are 1, 2, ..., n in offset order, carrying the key's input
    ids in the order they were produced: nothing lost, nothing doubled."""
    counted = output.by_key()
    assert not output.errors, output.errors[:3]
    for key, ids in sent.items():
        seen = counted.get(key, [])
        assert [n for n, _ in seen] == list(range(1, len(ids) + 1)), (
            f"{key}: counts {[n for n, _ in seen][:20]}... of {len(ids)} inputs ({about})")
        assert [i for _, i in seen] == ids, f"{key}: the input ids differ"
    assert output.count() == sum(len(v) for v in sent.values())


def _uncommitted_count(bootstrap: str, ends: dict[int, int]) -> int:
    """Records in the output's logs as read_uncommitted sees them, aborted ones included."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "quix-uncommitted",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    tps = [TopicPartition(SINK, p, 0) for p in ends]
    c.assign(tps)
    seen = 0
    try:
        def done() -> bool:
            nonlocal seen
            seen += sum(1 for m in c.consume(500, 0.2) if m.error() is None)
            return all(tp.offset >= ends[tp.partition] for tp in c.position(tps))
        wait_until(done, 60, "the output read uncommitted")
    finally:
        c.close()
    return seen


def _leader(cluster: LocalCluster, topic: str, partition: int) -> int:
    return cluster.leader_of(topic, partition)


def test_quix_exactly_once_counts_every_input_once_across_a_broker_sigkill(
        tmp_path: Path) -> None:
    if not quix_python().exists():
        pytest.fail(f"no Quix virtualenv at {quix_python()} (./dev setup makes it)")
    cluster = start_cluster(tmp_path / "txnmore-quix-cluster")
    app: QuixApp | None = None
    output: Output | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futures = admin.create_topics([
            NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
            for t in (SOURCE, SINK)])
        for f in futures.values():
            f.result(30)
        wait_until(lambda: all(_leader(cluster, t, p) > 0 for t in (SOURCE, SINK)
                               for p in range(PARTITIONS)), 30, "leaders")
        producer = input_producer(cluster.bootstrap)
        sent: dict[str, list[str]] = defaultdict(list)
        # 2,000 inputs in four phases (5,000 before: the same phases, each 2.5x as long, for
        # about twice the CPU; every phase still spans many of the app's transactions).
        _produce(producer, 0, 600, sent)

        output = Output(cluster.bootstrap)
        app = QuixApp(cluster.bootstrap, tmp_path)

        def reached(n: int) -> Any:
            assert app is not None and output is not None
            app.supervise()
            return output.count() >= n

        wait_progress(lambda: reached(300), output.count, 120, "the app's first output")

        # SIGKILL the broker leading an output partition mid-run; input keeps coming.
        victim = _leader(cluster, SINK, 0)
        cluster.kill(victim)
        _produce(producer, 600, 600, sent)
        wait_progress(lambda: reached(800), output.count, 120,
                      "output while a broker is down")

        cluster.start_node(victim)
        _produce(producer, 1200, 200, sent)
        wait_progress(lambda: reached(1400), output.count, 120, "output after the restart")
        # The app itself SIGKILLed while it writes (input trickling in): its open transaction
        # is aborted by the next incarnation, and those records must stay invisible.
        trickle = threading.Thread(target=_produce, args=(producer, 1400, 600, sent, 5))
        trickle.start()
        wait_progress(lambda: reached(1500), output.count, 120, "output of the trickle")
        app.kill()
        trickle.join(180)
        total = sum(len(v) for v in sent.values())

        def complete() -> bool:
            reached(0)
            counted = output.by_key()  # type: ignore[union-attr]
            return sum(max((n for n, _ in v), default=0) for v in counted.values()) >= total
        wait_progress(complete, output.count, 120, f"every one of {total} inputs counted")
        app.stop()
        # Whatever the app had in flight is committed or aborted by now; read a moment more.
        wait_until(lambda: output.count() >= total, 30, "the output settled")  # type: ignore[union-attr]

        assert_counted_once(output, sent, f"app starts {app.starts}, exits {app.exits}")
        # The aborted attempts are in the log (read_uncommitted sees them): read_committed hid
        # them, and the counts above prove nothing was doubled.
        ends = {p: max(o for o, _ in output.records[p]) + 1 for p in output.records}
        print(f"output: {total} committed, {_uncommitted_count(cluster.bootstrap, ends)} "
              f"records read uncommitted (app starts {app.starts})")
    finally:
        if app is not None:
            app.stop()
        if output is not None:
            output.close()
        cluster.stop()
