"""Kafka's own Java share consumer (``KafkaShareConsumer``, kafka-clients 4.1.1, the reference
implementation of KIP-932) on a floodmark broker with ``group.share.enable=true``. Members are
``tests/reference/clients/ShareMember.java`` (compiled by the test), in explicit
acknowledgement mode, one JVM each, on one share group and a one-partition topic:

1. two members share the partition's records: every record is accepted exactly once, both
   members get records, and a record the member RELEASEs comes back (delivery count 2) and is
   accepted then;
2. a member that acquires records and stops polling holds them only for the acquisition lock
   (``group.share.record.lock.duration.ms``): another member gets them, delivery count 2;
3. the broker restarts while a member runs: records accepted before are never delivered again,
   records produced afterwards are all accepted.

Waits fail only when consumption stops for ``STALL_S``. On demand (several JVMs):
``./dev test-slow tests/reference/test_java_share_consumer_on_floodmark.py``."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client.connection import KafkaConnection
from tests.jvm import SHORT_RUN_JVM_OPTS
from tests.reference.kafka_node import KAFKA_DIR, LIB, KafkaUnavailable, fetch_jars

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SOURCE = Path(__file__).with_name("clients") / "ShareMember.java"
TOPIC, GROUP = "java-share", "java-share-g"
STALL_S = 90.0
LOCK_MS = 3_000


class Member:
    def __init__(self, classpath: str, bootstrap: str, name: str, log: Path,
                 mode: str = "normal") -> None:
        self.name = name
        self.lines: list[str] = []
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", *SHORT_RUN_JVM_OPTS,
             f"-Dlog4j2.configurationFile={KAFKA_DIR}/log4j2-tools.properties",
             "-cp", classpath, "ShareMember", bootstrap, GROUP, TOPIC, name, mode],
            stdout=subprocess.PIPE, stderr=self._log, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def records(self, since: int = 0) -> list[tuple[int, int, str, str]]:
        """(offset, delivery count, value, ACCEPT|RELEASE|HELD) of each record delivered."""
        out = []
        for line in list(self.lines)[since:]:
            if line.startswith("REC "):
                _, offset, count, value, kind = line.split()
                out.append((int(offset), int(count), value, kind))
        return out

    def accepted(self, since: int = 0) -> list[str]:
        return [v for _, _, v, kind in self.records(since) if kind == "ACCEPT"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def _compile(out: Path) -> str:
    if shutil.which("javac") is None:
        pytest.skip("the Java share consumer needs javac (a JDK 17)")
    try:
        fetch_jars()
    except KafkaUnavailable as exc:
        pytest.skip(f"kafka-clients unavailable: {exc}")
    subprocess.run(["javac", "-nowarn", "-cp", f"{LIB}/*", "-d", str(out), str(SOURCE)],
                   check=True, timeout=180)
    return f"{out}:{LIB}/*"


def _members(bootstrap: str) -> int:
    """How many members the share group has (ShareGroupDescribe)."""
    with KafkaConnection(bootstrap, timeout_s=10) as c:
        g = c.request(77, 1, {"group_ids": [GROUP],
                              "include_authorized_operations": False}).groups[0]
        return len(g.members) if g.error_code == 0 else 0


def _produce(bootstrap: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(TOPIC, value=v.encode(), partition=0)
    assert p.flush(30) == 0


def _wait(what: str, done: Callable[[], bool], progress: Callable[[], int]) -> None:
    """Until ``done()``; fails when ``progress()`` (a count of events) stands still for
    ``STALL_S``."""
    last, last_change = progress(), time.monotonic()
    for _ in range(100_000):
        if done():
            return
        now = progress()
        if now != last:
            last, last_change = now, time.monotonic()
        assert time.monotonic() - last_change < STALL_S, f"no progress: {what}"
        time.sleep(0.2)
    raise AssertionError(f"poll budget spent: {what}")


def test_java_share_consumers_on_floodmark(tmp_path: Path, broker_factory: Any) -> None:
    classpath = _compile(tmp_path / "classes")
    b = broker_factory("--set", "group.share.enable=true",
                       "--set", "share.auto.offset.reset=earliest",
                       "--set", f"group.share.record.lock.duration.ms={LOCK_MS}")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    members: list[Member] = []

    def start(name: str, mode: str = "normal") -> Member:
        m = Member(classpath, b.bootstrap, name, tmp_path / f"{name}.log", mode)
        members.append(m)
        return m

    def all_accepted() -> Counter[str]:
        return Counter(v for m in members for v in m.accepted())

    try:
        # 1. two members share the partition; "release:" records come back once
        a, bm = start("a"), start("b")
        # both JVMs up and in the group before the first record (a JVM takes up to 30 s to
        # start on a loaded machine: the first one up would take every record)
        _wait("both members joined", lambda: _members(b.bootstrap) == 2,
              lambda: sum(len(m.lines) for m in members) + _members(b.bootstrap))
        values = [f"release:{i}" if i % 25 == 3 else f"v{i}" for i in range(100)]
        for i in range(0, 100, 20):
            _produce(b.bootstrap, values[i:i + 20])
            _wait("phase 1", lambda i=i: set(values[:i + 20]) <= set(all_accepted()),
                  lambda: sum(len(m.lines) for m in members))
        counts = all_accepted()
        assert all(counts[v] == 1 for v in values), {v: c for v, c in counts.items() if c != 1}
        assert a.accepted() and bm.accepted(), "both members get records"
        for v in (v for v in values if v.startswith("release:")):
            seen = [(count, kind) for m in (a, bm) for _, count, value, kind in m.records()
                    if value == v]
            assert (1, "RELEASE") in seen and (2, "ACCEPT") in seen, (v, seen)
        a.stop()
        bm.stop()
        # 2. a member that stops polling holds its records for the lock duration only
        stalled = start("s", "stall")
        _produce(b.bootstrap, [f"t{i}" for i in range(5)])
        _wait("the stalling member acquires", lambda: "STALLED" in stalled.lines,
              lambda: len(stalled.lines))
        held = {v for _, _, v, _ in stalled.records()}
        c = start("c")
        _wait("the held records go to another member", lambda: held <= set(c.accepted()),
              lambda: len(c.lines))
        assert all(count >= 2 for _, count, v, _ in c.records() if v in held)
        stalled.stop()
        # 3. the broker restarts under a running member
        _produce(b.bootstrap, [f"r{i}" for i in range(5)])
        _wait("before the restart", lambda: {f"r{i}" for i in range(5)} <= set(c.accepted()),
              lambda: len(c.lines))
        before = set(all_accepted())
        mark = len(c.lines)
        b.restart()
        after_values = [f"s{i}" for i in range(5)]
        _produce(b.bootstrap, after_values)
        _wait("after the restart", lambda: set(after_values) <= set(c.accepted(mark)),
              lambda: len(c.lines))
        again = {v for _, _, v, _ in c.records(mark)} & before
        assert not again, f"accepted before the restart, delivered again: {again}"
    finally:
        for m in members:
            m.stop()
