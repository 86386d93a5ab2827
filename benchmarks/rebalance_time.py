"""Rebalance time of a 10-member group after one member leaves: classic (eager and
cooperative-sticky) vs KIP-848, side by side.

Starts a broker, creates a topic of ``--partitions`` partitions and a producer thread that
writes to every partition steadily, then, for each round and each mode in turn (so the modes
share the machine's load), starts ``--members`` confluent-kafka consumers (librdkafka) on their
own threads in one group, waits until every partition is owned and consumed, closes one member
(LeaveGroup, or ConsumerGroupHeartbeat with epoch -1) and measures:

The group is settled first (every partition owned, consumed, spread evenly). Measured:

* **owned**: the time until the others own every partition again (none owned twice);
* **consuming**: the time until every partition has delivered a record to its owner since
  the leave and since it got the partition (every remaining member consuming again);
* **idle partition-s**: the partition-seconds without an owner meanwhile (an eager classic
  rebalance takes every partition from every member; cooperative-sticky and KIP-848 move only
  the leaver's).

Modes: ``classic-eager`` (``partition.assignment.strategy=range``), ``classic-coop``
(``cooperative-sticky``) and ``consumer`` (``group.protocol=consumer``, the broker's
``uniform`` assignor). Both protocols learn of a rebalance through heartbeats:
``--heartbeat-ms`` sets the classic members' ``heartbeat.interval.ms`` and the broker's
``group.consumer.heartbeat.interval.ms`` alike (Kafka's defaults are 3000 and 5000). Prints
one table: median, min and max over ``--rounds`` rounds (a new group each round).

    .venv/bin/python benchmarks/rebalance_time.py [--members 10] [--partitions 20]
        [--rounds 5] [--heartbeat-ms 1000] [--modes classic-eager,classic-coop,consumer]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

LIMIT_S = 120.0
TOPIC = "rebalance"
MODES: dict[str, dict[str, str]] = {
    "classic-eager": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic-coop": {"group.protocol": "classic",
                     "partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}


class Member:
    """One consumer polling on its own thread: what it owns, since when, and when each
    partition last delivered a record to it."""

    def __init__(self, conf: dict[str, str | int]) -> None:
        self.consumer = Consumer(conf)
        self.lock = threading.Lock()
        self.owned_since: dict[int, float] = {}  # partition -> when it was assigned
        self.delivered_at: dict[int, float] = {}  # partition -> last record's arrival
        # What it owns, from the rebalance callbacks (incremental ones for cooperative
        # protocols, the whole assignment for eager ones): ``assignment()`` polled between
        # polls misses an eager revoke-and-reassign that completes within one poll.
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._revoked)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        now = time.monotonic()
        with self.lock:
            for tp in partitions:
                self.owned_since.setdefault(tp.partition, now)

    def _revoked(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            for tp in partitions:
                self.owned_since.pop(tp.partition, None)

    def _run(self) -> None:
        for _ in range(10_000_000):  # bounded; stops on ``stop``
            if self.stop.is_set():
                break
            m = self.consumer.poll(0.02)
            if m is not None and m.error() is None:
                with self.lock:
                    self.delivered_at[m.partition()] = time.monotonic()
        self.consumer.close()
        with self.lock:
            self.owned_since.clear()

    def owned(self) -> set[int]:
        with self.lock:
            return set(self.owned_since)

    def consuming_since(self, t0: float) -> set[int]:
        """Partitions it owns that delivered a record after ``t0`` and after it got them."""
        with self.lock:
            return {p for p, since in self.owned_since.items()
                    if self.delivered_at.get(p, 0.0) > max(t0, since)}


def covered(members: list[Member], partitions: int) -> bool:
    owned = [m.owned() for m in members]
    return sum(len(o) for o in owned) == partitions and \
        set().union(*owned) == set(range(partitions))


def settled(members: list[Member], partitions: int, t0: float) -> bool:
    """Every partition owned and consumed, and spread evenly (a KIP-848 group still
    reconciling covers every partition before the last members got theirs)."""
    counts = [len(m.owned()) for m in members]
    return consuming(members, partitions, t0) and max(counts) - min(counts) <= 1


def consuming(members: list[Member], partitions: int, t0: float) -> bool:
    return covered(members, partitions) and \
        set().union(*(m.consuming_since(t0) for m in members)) == set(range(partitions))


def wait(pred: object, what: str, members: list[Member], partitions: int) -> float:
    """Wait for ``pred()`` (bounded by LIMIT_S); the partition-seconds without an owner
    meanwhile (sampled every 10 ms)."""
    deadline = time.monotonic() + LIMIT_S
    unowned_s = 0.0
    last = time.monotonic()
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return unowned_s
        time.sleep(0.01)
        now = time.monotonic()
        owned = set().union(*(m.owned() for m in members))
        unowned_s += (partitions - len(owned)) * (now - last)
        last = now
    raise SystemExit(f"timed out waiting for {what}")


@dataclass(frozen=True)
class Round:
    owned_s: float
    consuming_s: float
    unowned_partition_s: float


def one_round(bootstrap: str, mode: str, group: str, members: int, partitions: int,
              heartbeat_ms: int) -> Round:
    conf: dict[str, str | int] = {"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "latest", **MODES[mode]}
    if MODES[mode]["group.protocol"] == "classic":
        conf["heartbeat.interval.ms"] = heartbeat_ms
    group_members = [Member(conf) for _ in range(members)]
    try:
        start = time.monotonic()
        wait(lambda: settled(group_members, partitions, start),
             "the group to own and consume every partition, evenly", group_members,
             partitions)
        leaving = group_members.pop()
        t0 = time.monotonic()
        leaving.stop.set()
        # (the leaver is out of the list: its partitions count as unowned from t0)
        unowned = wait(lambda: covered(group_members, partitions),
                       "the others to own every partition", group_members, partitions)
        owned_s = time.monotonic() - t0
        unowned += wait(lambda: consuming(group_members, partitions, t0),
                        "the others to consume every partition", group_members, partitions)
        return Round(owned_s, time.monotonic() - t0, unowned)
    finally:
        for m in group_members:
            m.stop.set()
        for m in group_members:
            m.thread.join(LIMIT_S)


def produce(bootstrap: str, partitions: int, stop: threading.Event) -> None:
    """About 50 records a second per partition until ``stop`` (bounded)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(100_000_000):
        if stop.is_set():
            break
        p.produce(TOPIC, value=b"x", partition=i % partitions)
        if i % partitions == partitions - 1:
            p.poll(0)
            time.sleep(0.02)
    p.flush(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown modes {unknown}; known: {list(MODES)}")
    with tempfile.TemporaryDirectory() as tmp:
        log = open(Path(tmp) / "broker.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", f"{tmp}/data",
             "--listen", "127.0.0.1:0", "--set",
             f"group.consumer.heartbeat.interval.ms={args.heartbeat_ms}"],
            stdout=subprocess.PIPE, stderr=log, env=dict(os.environ))
        stop = threading.Event()
        producer: threading.Thread | None = None
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            found = re.search(r"listening on (\S+):(\d+)", line)
            if found is None:
                raise SystemExit(f"broker did not start: {line!r}")
            bootstrap = f"{found.group(1)}:{found.group(2)}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
            producer = threading.Thread(target=produce, args=(bootstrap, args.partitions, stop),
                                        daemon=True)
            producer.start()
            results: dict[str, list[Round]] = {m: [] for m in modes}
            for r in range(args.rounds):
                for mode in modes:  # side by side: each round runs every mode
                    results[mode].append(one_round(bootstrap, mode, f"{mode}-{r}",
                                                   args.members, args.partitions,
                                                   args.heartbeat_ms))
                    print(f"round {r} {mode}: {results[mode][-1]}", file=sys.stderr)
            print(f"{args.members} members, {args.partitions} partitions, heartbeat "
                  f"{args.heartbeat_ms} ms, one member leaves; {args.rounds} rounds; "
                  f"load average {os.getloadavg()[0]:.1f}")
            print(f"{'mode':14s} {'owned s (med [min-max])':>26s} "
                  f"{'consuming s (med [min-max])':>29s} {'idle partition-s (med)':>23s}")
            for mode, rounds in results.items():
                def cell(xs: list[float]) -> str:
                    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"

                print(f"{mode:14s} {cell([x.owned_s for x in rounds]):>26s} "
                      f"{cell([x.consuming_s for x in rounds]):>29s} "
                      f"{statistics.median(x.unowned_partition_s for x in rounds):>23.2f}")
        finally:
            stop.set()
            if producer is not None:
                producer.join(60)
            proc.terminate()
            proc.wait(30)
            log.close()


if __name__ == "__main__":
    main()
