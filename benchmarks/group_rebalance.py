"""Rebalance time of a 10-member group after one member leaves: classic vs KIP-848.

Starts a broker, creates a topic of ``--partitions`` partitions, and for each protocol
(librdkafka's ``group.protocol=classic`` with its default eager ``range,roundrobin`` assignor,
then ``group.protocol=consumer``) starts ``--members`` consumers on their own threads, waits
until every partition is owned, closes one member and measures the time until the others own
every partition again (no partition owned twice at the end), and the partition-seconds
spent without an owner meanwhile (an eager classic rebalance takes every partition away from
every member; KIP-848 moves only the leaver's partitions). Repeats ``--rounds`` times (a new
group each round) and prints the median and the spread.

Both protocols learn of a rebalance through their heartbeats: ``--heartbeat-ms`` sets the
classic members' ``heartbeat.interval.ms`` and the broker's
``group.consumer.heartbeat.interval.ms`` alike (Kafka's defaults are 3000 and 5000).

    .venv/bin/python benchmarks/group_rebalance.py [--members 10] [--partitions 20]
        [--rounds 3] [--heartbeat-ms 1000]
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
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

LIMIT_S = 120.0


class Member:
    def __init__(self, conf: dict[str, str | int], topic: str) -> None:
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])
        self.owned: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.05)
            self.owned = {tp.partition for tp in self.consumer.assignment()}
        self.consumer.close()
        self.owned = set()


def covered(members: list[Member], partitions: int) -> bool:
    owned = [m.owned for m in members]
    return sum(len(o) for o in owned) == partitions and \
        set().union(*owned) == set(range(partitions))


def wait(pred: object, what: str, members: list[Member] | None = None,
         partitions: int = 0) -> float:
    """Wait for ``pred()``; with ``members``, the partition-seconds spent without an owner
    meanwhile (sampled every 10 ms)."""
    deadline = time.monotonic() + LIMIT_S
    unowned_s = 0.0
    last = time.monotonic()
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return unowned_s
        time.sleep(0.01)
        now = time.monotonic()
        if members is not None:
            owned = set().union(*(m.owned for m in members))
            unowned_s += (partitions - len(owned)) * (now - last)
        last = now
    raise SystemExit(f"timed out waiting for {what}")


def one_round(bootstrap: str, protocol: str, topic: str, group: str, members: int,
              partitions: int, heartbeat_ms: int) -> tuple[float, float]:
    conf: dict[str, str | int] = {"bootstrap.servers": bootstrap, "group.id": group,
                                  "group.protocol": protocol}
    if protocol == "classic":
        conf["heartbeat.interval.ms"] = heartbeat_ms
    group_members = [Member(conf, topic) for _ in range(members)]
    try:
        wait(lambda: covered(group_members, partitions), "the group to own every partition")
        leaving = group_members.pop()
        t0 = time.perf_counter()
        leaving.stop.set()
        unowned_s = wait(lambda: not leaving.thread.is_alive(), "the member to leave",
                         group_members, partitions)
        unowned_s += wait(lambda: covered(group_members, partitions), "the others to take over",
                          group_members, partitions)
        return time.perf_counter() - t0, unowned_s
    finally:
        for m in group_members:
            m.stop.set()
        for m in group_members:
            m.thread.join(LIMIT_S)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = open(Path(tmp) / "broker.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", f"{tmp}/data",
             "--listen", "127.0.0.1:0", "--set",
             f"group.consumer.heartbeat.interval.ms={args.heartbeat_ms}"],
            stdout=subprocess.PIPE, stderr=log, env=dict(os.environ))
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            m = re.search(r"listening on (\S+):(\d+)", line)
            if m is None:
                raise SystemExit(f"broker did not start: {line!r}")
            bootstrap = f"{m.group(1)}:{m.group(2)}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("rebalance", args.partitions, 1)])[
                "rebalance"].result(30)
            for protocol in ("classic", "consumer"):
                runs = [one_round(bootstrap, protocol, "rebalance", f"{protocol}-{r}",
                                  args.members, args.partitions, args.heartbeat_ms)
                        for r in range(args.rounds)]
                times = [t for t, _ in runs]
                unowned = [u for _, u in runs]
                print(f"{protocol:8s}: {args.members} members, {args.partitions} partitions, "
                      f"heartbeat {args.heartbeat_ms} ms: one member leaves -> all partitions "
                      f"owned again in median {statistics.median(times):.2f} s "
                      f"(min {min(times):.2f}, max {max(times):.2f}); partition-seconds "
                      f"without an owner meanwhile: median {statistics.median(unowned):.2f} "
                      f"({args.rounds} rounds)")
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()


if __name__ == "__main__":
    main()
