"""One consumer-group member on its own thread, for the coordinator failover tests (classic and
KIP-848 protocols): it records its rebalance callbacks, commits synchronously every 50 records,
and stops in two steps so a test can check that every record was committed:

1. ``finish()`` stops consuming and commits what was consumed (``committed`` is set after);
2. ``close()`` leaves the group.

A member that closed first would start a rebalance that revokes the others' partitions before
their final commit: their last offsets would be lost to the test, not to the broker."""

from __future__ import annotations

import collections
import logging
import re
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

_PARTITION = re.compile(r"\[(\d+)\]")
_REASONS = ("rejoin", "rebalanc", "joingroup", "leavegroup", "heartbeat failed",
            "heartbeat error", "metadata change", "subscription")


class _Collect(logging.Handler):
    """Keeps librdkafka's lines about (re)joining the group."""

    def __init__(self, into: collections.deque[str],
                 partitions: dict[int, collections.deque[str]]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into
        self.partitions = partitions

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        low = text.lower()
        if any(k in low for k in _REASONS):
            self.into.append(text[:300])
        found = _PARTITION.search(text)
        if found is not None:
            self.partitions.setdefault(int(found.group(1)), collections.deque(maxlen=60)
                                       ).append(f"{record.created:.3f} {text[:400]}")


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, *,
                 static: bool = False, protocol: str = "classic",
                 extra: dict[str, Any] | None = None, work_s: float = 0.005) -> None:
        self.name = name
        self.events: list[str] = []  # rebalance callbacks, in order
        self.commit_errors: list[str] = []
        self.positions: dict[int, int] = {}  # partition -> next offset after the last consumed
        self.duplicates = 0  # records consumed a second time
        self.acknowledged: dict[int, int] = {}  # partition -> offset of its last acknowledged commit
        self.values: set[int] = set()
        self.seen = 0
        self.member_id = ""
        self.work_s = work_s
        self.stop = threading.Event()
        self.committed = threading.Event()
        self.may_close = threading.Event()
        self.lock = threading.Lock()
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000, "client.id": name}
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        if static:
            config["group.instance.id"] = name
        config.update(extra or {})
        # librdkafka's group debug lines that say why it (re)joins, kept for failure messages
        self.join_reasons: collections.deque[str] = collections.deque(maxlen=20)
        log = logging.getLogger(f"group-member.{name}")
        log.propagate = False
        log.setLevel(logging.DEBUG)
        self.fetch_lines: dict[int, collections.deque[str]] = {}  # partition -> last lines
        log.addHandler(_Collect(self.join_reasons, self.fetch_lines))
        config.update({"debug": "cgrp,fetch", "logger": log})
        self.consumer = Consumer(config)
        self.consumer.subscribe(
            [topic], on_assign=lambda _c, ps: self._event(f"assign {len(ps)}"),
            on_revoke=lambda _c, ps: self._event(f"revoke {len(ps)}"),
            on_lost=lambda _c, ps: self._event(f"lost {len(ps)}"))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _event(self, what: str) -> None:
        with self.lock:
            self.events.append(what)

    def owned(self) -> int:
        return len(self.consumer.assignment())

    def _commit(self) -> None:
        try:
            done = self.consumer.commit(asynchronous=False)
            with self.lock:
                for tp in done or []:
                    if tp.error is None:
                        self.acknowledged[tp.partition] = tp.offset
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing new since the last one
                with self.lock:
                    self.commit_errors.append(str(exc))

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            m = self.consumer.poll(0.2)
            if not self.member_id:
                self.member_id = self.consumer.memberid() or ""
            if m is None or m.error() is not None:
                continue
            n += 1
            with self.lock:
                self.seen += 1
                value = int(m.value())
                if value in self.values:
                    self.duplicates += 1
                self.values.add(value)
                self.positions[m.partition()] = max(self.positions.get(m.partition(), 0),
                                                    m.offset() + 1)
            time.sleep(self.work_s)  # a consumer that works: the failovers land mid-stream
            if n % 50 == 0:
                self._commit()
        self._commit()
        self.committed.set()
        self.may_close.wait(60)
        self.consumer.close()

    def finish(self) -> None:
        self.stop.set()

    def close(self) -> None:
        self.stop.set()
        self.may_close.set()


def finish_all(members: list[Member], timeout_s: float = 60) -> None:
    """Every member stops and commits; only then does any of them leave the group."""
    for m in members:
        m.finish()
    for m in members:
        assert m.committed.wait(timeout_s), f"{m.name} did not commit within {timeout_s} s"


def close_all(members: list[Member]) -> None:
    for m in members:
        m.close()
    for m in members:
        m.thread.join(30)
