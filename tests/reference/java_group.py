"""Kafka's own Java consumer (kafka-clients from ``tools/kafka/pom.xml``) as a group member in a
JVM of its own, for the reference tests that run it on floodmark
(``test_java_consumer_groups_on_floodmark.py``, ``test_java_kip848_migration.py``).

``compile_group_consumer`` builds ``clients/GroupConsumer.java`` once per directory (a module's
tests share it through a fixture); ``Member`` runs it and reads what it prints: every record,
every commit, and the consumer's own ConsumerRebalanceListener callbacks with the wall clock of
each, so ``overlaps`` can tell whether two members ever owned one partition at once."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.jvm import SHORT_RUN_JVM_OPTS
from tests.reference.kafka_node import KAFKA_DIR, LIB, KafkaUnavailable, fetch_jars

SOURCE = Path(__file__).with_name("clients") / "GroupConsumer.java"
MAX_POLL_RECORDS = 100  # GroupConsumer's max.poll.records
STALL_S = 90.0


def compile_group_consumer(out: Path) -> str:
    """The classpath of the compiled member (fetching the jars on first use); skips the test
    without a JDK or the jars."""
    if shutil.which("javac") is None:
        pytest.skip("the Java consumer needs javac (a JDK 17)")
    try:
        fetch_jars()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    if not (out / "GroupConsumer.class").exists():
        subprocess.run(["javac", "-nowarn", "-cp", f"{LIB}/*", "-d", str(out), str(SOURCE)],
                       check=True, timeout=300, capture_output=True)
    return f"{out}:{LIB}/*"


@dataclass(frozen=True, slots=True)
class Callback:
    """One ConsumerRebalanceListener call: ASSIGNED, REVOKED or LOST."""

    kind: str
    at_ms: int
    partitions: frozenset[int]


class Member:
    def __init__(self, classpath: str, bootstrap: str, group: str, topic: str, protocol: str,
                 name: str, log: Path) -> None:
        self.name = name
        self.lines: list[str] = []
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", *SHORT_RUN_JVM_OPTS,
             f"-Dlog4j2.configurationFile={KAFKA_DIR}/log4j2-tools.properties",
             "-cp", classpath, "GroupConsumer", bootstrap, group, topic, protocol, name],
            stdout=subprocess.PIPE, stderr=self._log, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def records(self) -> list[tuple[int, int]]:
        """(partition, offset) of every record delivered, in order."""
        return [(int(p), int(o)) for kind, p, o in
                (line.split() for line in list(self.lines) if line.startswith("REC "))
                if kind == "REC"]

    def callbacks(self) -> list[Callback]:
        out = []
        for line in list(self.lines):
            kind, _, rest = line.partition(" ")
            if kind in ("ASSIGNED", "REVOKED", "LOST"):
                at_ms, _, parts = rest.partition(" ")
                out.append(Callback(kind, int(at_ms),
                                    frozenset(int(p) for p in parts.split(",") if p)))
        return out

    def assigned(self) -> set[int]:
        """Partitions owned now, from the rebalance callbacks."""
        owned: set[int] = set()
        for c in self.callbacks():
            if c.kind == "ASSIGNED":
                owned |= c.partitions
            else:
                owned -= c.partitions
        return owned

    def errors(self) -> list[str]:
        return [line for line in list(self.lines) if line.startswith("ERROR ")]

    def stop(self) -> None:
        """SIGTERM: the member closes (leaves its group) and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self._log.closed:
            self._log.close()


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Records keyed ``start``..``start+count-1``, idempotent, acks=all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 120_000})
    for i in range(start, start + count):
        producer.produce(topic, key=str(i).encode(), value=b"v")
        producer.poll(0)
    assert producer.flush(150) == 0


def wait_consumed(members: Sequence[Member], total: int, stall_s: float = STALL_S) -> None:
    """Until the members together have seen ``total`` distinct records (fails when the count
    does not grow for ``stall_s``)."""
    last, seen = time.monotonic(), -1
    while True:
        distinct = len({r for m in members for r in m.records()})
        if distinct >= total:
            return
        if distinct > seen:
            seen, last = distinct, time.monotonic()
        assert time.monotonic() - last < stall_s, (
            f"{distinct} of {total} records consumed; "
            + "; ".join(f"{m.name}: {m.lines[-6:]}" for m in members))
        time.sleep(0.2)


def ownership(member: Member) -> list[tuple[int, int, float]]:
    """(partition, from ms, until ms) of each time the member owned a partition, from its own
    callbacks (until: infinity while it still owns it)."""
    since: dict[int, int] = {}
    out: list[tuple[int, int, float]] = []
    for c in member.callbacks():
        for p in c.partitions:
            if c.kind == "ASSIGNED":
                since.setdefault(p, c.at_ms)
            elif p in since:
                out.append((p, since.pop(p), c.at_ms))
    out.extend((p, start, float("inf")) for p, start in since.items())
    return out


def overlaps(members: Sequence[Member]) -> list[str]:
    """Every time two members owned one partition at once (by their callbacks' clocks; a
    hand-over in the same millisecond is not one)."""
    spans = [(m.name, *span) for m in members for span in ownership(m)]
    return [f"partition {p}: {a} {a_from}..{a_until}, {b} {b_from}..{b_until}"
            for i, (a, p, a_from, a_until) in enumerate(spans)
            for b, q, b_from, b_until in spans[i + 1:]
            if a != b and p == q and a_from < b_until and b_from < a_until]


def backwards(members: Sequence[Member]) -> list[tuple[str, int, int, int]]:
    """(member, partition, offset, the offset before) of each record that did not follow the
    member's previous one of that partition within one ownership of it."""
    out = []
    for m in members:
        last: dict[int, int] = {}
        for line in list(m.lines):
            kind, _, rest = line.partition(" ")
            if kind in ("ASSIGNED", "REVOKED", "LOST"):
                for p in (int(x) for x in rest.partition(" ")[2].split(",") if x):
                    last.pop(p, None)
            elif kind == "REC":
                p, o = (int(x) for x in rest.split())
                if o <= last.get(p, -1):
                    out.append((m.name, p, o, last[p]))
                last[p] = o
    return out
