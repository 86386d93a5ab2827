"""How long a test waits for its broker: from the fixture's start to the first acknowledged
write, floodmark's ``floodmark.testing`` fixtures beside a real Apache Kafka started the way a
test suite would start one locally (``tests/reference/kafka_node.KafkaCluster``: KRaft
combined-mode JVMs, storage formatted first; no docker).

Setups: ``single`` (floodmark's ``EmbeddedBroker``: one process; one Kafka node) and ``cluster``
(floodmark's ``EmbeddedCluster(brokers=3)``: a controller and three broker processes; three
Kafka nodes, ``default.replication.factor=3``). For each: the time until the fixture returns
(serving), then until a confluent-kafka producer (``acks=all``) has its first record
acknowledged on a topic that the write itself creates, and the CPU seconds the node processes
used until they served and until that first ack. Medians over ``--reps`` starts, each on a fresh data directory; the systems
alternate. Kafka runs only where Java and its jars are available (``./dev kafka fetch``).

    .venv/bin/python benchmarks/fixture_startup.py [--setups single,cluster] [--reps 3]
        [--no-kafka]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from tests.reference.kafka_node import KafkaCluster, KafkaUnavailable, missing_reason

from floodmark.testing import EmbeddedBroker, EmbeddedCluster

FIRST_ACK_TIMEOUT_S = 120.0
CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK"))


@dataclass
class Started:
    bootstrap: str
    pids: list[int]
    stop: Callable[[], None]


@dataclass
class Figures:
    ready_s: list[float] = field(default_factory=list)
    first_ack_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    serving_cpu_s: list[float] = field(default_factory=list)


def cpu_ticks(pid: int) -> float:
    """CPU seconds (user + system, to the clock tick; ``waiting.process_cpu_s`` rounds to whole
    seconds) a process has used; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def start_floodmark(setup: str, where: Path) -> Started:
    if setup == "single":
        broker = EmbeddedBroker(data_dir=where).start()
        pid = broker.process.pid
        return Started(broker.bootstrap_servers, [] if pid is None else [pid], broker.stop)
    cluster = EmbeddedCluster(3, data_dir=where).start()
    pids = [p for n in cluster.cluster.node_ids if (p := cluster.cluster.pid(n)) is not None]
    return Started(cluster.bootstrap_servers, pids, cluster.stop)


def start_kafka(setup: str, where: Path) -> Started:
    brokers = 1 if setup == "single" else 3
    overrides = {} if brokers == 1 else {"default.replication.factor": "3"}
    cluster = KafkaCluster(where, brokers, overrides).start()
    return Started(cluster.bootstrap, [n.pid for n in cluster.nodes if n.pid], cluster.stop)


def first_ack(bootstrap: str, topic: str) -> None:
    """One record, acks=all, on a topic the write creates; returns once it is acknowledged."""
    failed: list[str] = []
    acked: list[int] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append(1)
        else:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.timeout.ms": int(FIRST_ACK_TIMEOUT_S * 1000),
                  "reconnect.backoff.ms": 20, "retry.backoff.ms": 20, "log_level": 3})
    p.produce(topic, b"first", on_delivery=on_delivery)
    remaining = p.flush(FIRST_ACK_TIMEOUT_S + 10)
    if remaining or failed or not acked:
        raise RuntimeError(f"first write not acknowledged: {failed or remaining}")


def measure(name: str, start: Callable[[str, Path], Started], setup: str,
            figures: Figures) -> None:
    with tempfile.TemporaryDirectory(prefix=f"startup-{name}-") as tmp:
        t0 = time.monotonic()
        started = start(setup, Path(tmp) / "data")
        t_ready = time.monotonic()
        serving_cpu = sum(cpu_ticks(pid) for pid in started.pids)
        try:
            first_ack(started.bootstrap, "first-write")
            t_ack = time.monotonic()
            cpu = sum(cpu_ticks(pid) for pid in started.pids)
        finally:
            started.stop()
    figures.ready_s.append(t_ready - t0)
    figures.first_ack_s.append(t_ack - t0)
    figures.cpu_s.append(cpu)
    figures.serving_cpu_s.append(serving_cpu)
    print(f"  {setup:7s} {name:9s} serving {t_ready - t0:6.2f} s, first ack {t_ack - t0:6.2f} s,"
          f" node CPU {serving_cpu:6.2f} s serving, {cpu:6.2f} s first ack", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default="single,cluster")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-kafka", action="store_true", help="floodmark only")
    args = parser.parse_args(argv)
    setups = [s for s in args.setups.split(",") if s]
    for s in setups:
        if s not in ("single", "cluster"):
            parser.error(f"--setups: {s!r} is not single or cluster")
    kafka_reason = "--no-kafka" if args.no_kafka else missing_reason()
    systems: list[tuple[str, Callable[[str, Path], Started]]] = [("floodmark", start_floodmark)]
    if kafka_reason is None:
        systems.append(("kafka", start_kafka))
    else:
        print(f"(Kafka not run: {kafka_reason})")
    results: dict[tuple[str, str], Figures] = {}
    for setup in setups:
        for rep in range(args.reps):
            order = systems if rep % 2 == 0 else list(reversed(systems))
            for name, start in order:
                try:
                    measure(name, start, setup, results.setdefault((setup, name), Figures()))
                except KafkaUnavailable as exc:
                    print(f"  {setup} {name}: unavailable ({exc})")
    print()
    print(f"{'setup':8s} {'system':9s} {'serving s':>10s} {'first ack s':>12s} "
          f"{'CPU serving s':>14s} {'CPU 1st ack s':>14s}   (medians of {args.reps})")
    for (setup, name), fig in results.items():
        if fig.first_ack_s:
            print(f"{setup:8s} {name:9s} {statistics.median(fig.ready_s):10.2f} "
                  f"{statistics.median(fig.first_ack_s):12.2f} "
                  f"{statistics.median(fig.serving_cpu_s):14.2f} "
                  f"{statistics.median(fig.cpu_s):14.2f}")
    for setup in setups:
        ours, theirs = results.get((setup, "floodmark")), results.get((setup, "kafka"))
        if ours and theirs and ours.first_ack_s and theirs.first_ack_s:
            ratio = statistics.median(theirs.first_ack_s) / statistics.median(ours.first_ack_s)
            print(f"{setup}: Kafka takes {ratio:.1f}x floodmark's time to the first "
                  "acknowledged write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
