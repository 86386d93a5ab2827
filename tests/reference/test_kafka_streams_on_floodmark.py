"""Kafka Streams (the Java library, 4.1.1 from Maven Central) on a 3-broker floodmark cluster,
exactly-once (``exactly_once_v2``): a word count with a repartition topic and a changelog-backed
state store (``tests/reference/streams/WordCount.java``, compiled by the test), record caching off
so that every input word gives one output record.

The check is exactly-once made visible: read with ``read_committed``, the output holds, for each
word, the counts 1, 2, ..., n in order, once each, where n is how often the input holds the word
(an aborted transaction's records would repeat a count; a lost one would skip one). Half-way
through the input, the broker leading input partition 0 is SIGKILLed and started again later
(it may also be a group or transaction coordinator, and it holds replicas of the internal
topics). Waits fail only when the output stops growing.

On demand (a JVM, RocksDB and Maven's first fetch): ``./dev test-slow
tests/reference/test_kafka_streams_on_floodmark.py``."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import start_cluster, wait_until
from tests.reference.kafka_node import KAFKA_DIR, REPO, KafkaUnavailable, fetch_maven_jars

pytestmark = [pytest.mark.slow, pytest.mark.integration]

STREAMS_DIR = REPO / "tools" / "kafka-streams"
SOURCE = Path(__file__).with_name("streams") / "WordCount.java"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
LINES = 1200
STALL_S = 90.0


def _compile(out: Path) -> str:
    """The classpath of the compiled application (fetching the jars on first use)."""
    if shutil.which("javac") is None:
        pytest.skip("Kafka Streams needs javac (a JDK 17)")
    try:
        fetch_maven_jars(STREAMS_DIR / "pom.xml", STREAMS_DIR / "lib")
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    classpath = f"{STREAMS_DIR / 'lib'}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(SOURCE)], check=True,
                   timeout=300)
    return f"{out}:{classpath}"


def _line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 3))


class App:
    """The Streams application's process, its stdout lines collected by a thread."""

    def __init__(self, classpath: str, bootstrap: str, state_dir: Path, log: Path) -> None:
        self.lines: list[str] = []
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", f"-Dlog4j2.configurationFile={KAFKA_DIR}/log4j2-tools.properties",
             "-cp", classpath, "WordCount", bootstrap, "wordcount-eos", str(state_dir),
             "exactly_once_v2", "words-in", "counts-out"],
            stdout=subprocess.PIPE, stderr=self._log, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def states(self) -> list[str]:
        return [line.split()[1] for line in self.lines if line.startswith("STATE ")]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def test_streams_word_count_is_exactly_once_through_a_broker_sigkill(tmp_path: Path) -> None:
    classpath = _compile(tmp_path / "classes")
    cluster: LocalCluster = start_cluster(tmp_path / "cluster")
    app: App | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futures = admin.create_topics([NewTopic("words-in", 3, 3), NewTopic("counts-out", 3, 3)])
        for f in futures.values():
            f.result(60)
        app = App(classpath, cluster.bootstrap, tmp_path / "state", tmp_path / "streams.log")
        wait_until(lambda: "RUNNING" in app.states() or app.proc.poll() is not None, 180,
                   "the Streams application to run",
                   progress=lambda: (app.lines[-5:], _tail(tmp_path / "streams.log")))
        assert app.proc.poll() is None, _tail(tmp_path / "streams.log")

        expected: Counter[str] = Counter()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})
        victim = cluster.leader_of("words-in", 0)
        for i in range(LINES):
            line = _line(i)
            expected.update(line.split())
            producer.produce("words-in", key=str(i).encode(), value=line.encode())
            if i == LINES // 2:
                assert producer.flush(60) == 0
                cluster.kill(victim)
            if i == 3 * LINES // 4:
                assert producer.flush(120) == 0
                cluster.start_node(victim)
            producer.poll(0)
        assert producer.flush(120) == 0

        seen: dict[str, list[int]] = {w: [] for w in WORDS}
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "verify",
                             "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["counts-out"])
        last_progress = time.monotonic()
        total = sum(expected.values())
        try:
            while sum(len(v) for v in seen.values()) < total:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen[msg.key().decode()].append(int(msg.value().decode()))
                    last_progress = time.monotonic()
                assert app.proc.poll() is None, _tail(tmp_path / "streams.log")
                assert time.monotonic() - last_progress < STALL_S, (
                    f"no output for {STALL_S} s: {sum(len(v) for v in seen.values())} of "
                    f"{total}; app: {app.lines[-10:]}")
            # Anything more (a duplicate) would arrive with the rest: read until quiet.
            quiet_until = time.monotonic() + 5
            while time.monotonic() < quiet_until:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen[msg.key().decode()].append(int(msg.value().decode()))
        finally:
            consumer.close()
        for word in WORDS:
            assert seen[word] == list(range(1, expected[word] + 1)), (
                word, expected[word], _gaps(seen[word]))
    finally:
        if app is not None:
            app.stop()
        cluster.stop()


def _gaps(counts: list[int]) -> str:
    dup = [c for c, n in Counter(counts).items() if n > 1]
    return f"{len(counts)} records, last {counts[-3:]}, repeated {dup[:10]}"


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
