"""Two kafka-python 3.0.12 races that lose a group consumer's partitions, shown on floodmark
and on the real Apache Kafka (``--against kafka``) alike: the evidence behind
``tests/compat/test_kafka_python.py``'s ``_subscribe`` (issue 23, the kafka-3.7 flake).

    python -m tests.reference.kafka_python_races lost-rebalance [--poll-ms 1] [--against kafka]
    python -m tests.reference.kafka_python_races first-assignment [--runs 40] [--seed 7]
                                                 [--pattern old|subscribe] [--against kafka]

``lost-rebalance``: a lone group member (so the leader) consumes a one-partition topic; the
topic grows to two partitions; the leader rejoins for the metadata change. When that
JoinGroup/SyncGroup finishes while no ``poll`` waits on it (``--poll-ms 1``), kafka-python never
applies it: the consumer stays on partition [0], in state REBALANCING with heartbeats off, and
``poll`` spins. With ``--poll-ms 500`` the rebalance lands inside a poll and both partitions are
assigned.

``first-assignment``: the test's group consumer, pinned to Kafka 3.7, with random delays
injected into kafka-python's threads (applying a Metadata answer: up to 300 ms, half the
time; subscribing: up to 50 ms), as a loaded machine deschedules them. ``--pattern old``
subscribes in the constructor (the test before the fix): a topic-less bootstrap answer settles
the subscription's Metadata update, the first assignment is empty, and the metadata-triggered
rejoin is sometimes lost as above. ``--pattern subscribe`` uses the test's ``_subscribe``.
Prints, per run and in total: first assignments made without the topic's partitions and runs
that read nothing in 10 s.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewPartitions, NewTopic
from kafka.cluster import ClusterMetadata
from kafka.consumer.subscription_state import SubscriptionState

from tests.compat.test_kafka_python import _subscribe
from tests.conftest import BrokerProcess
from tests.reference.kafka_node import KafkaCluster


@contextmanager
def _broker(against: str, scratch: Path) -> Iterator[str]:
    """A bootstrap address: one floodmark broker, or one real Kafka node with floodmark's
    initial rebalance delay (300 ms: the JoinGroup timing the flake was seen with)."""
    if against == "kafka":
        kafka = KafkaCluster(scratch / "kafka",
                             overrides={"group.initial.rebalance.delay.ms": "300"}).start()
        try:
            yield kafka.bootstrap
        finally:
            kafka.stop()
    else:
        broker = BrokerProcess(scratch / "floodmark").start()
        try:
            yield broker.bootstrap
        finally:
            broker.stop()


def lost_rebalance(bootstrap: str, poll_ms: int) -> bool:
    """True when the metadata-triggered rebalance was applied (both partitions assigned)."""
    topic = f"lost-rebalance-{time.monotonic_ns()}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"{topic}-g",
                             enable_auto_commit=False, metadata_max_age_ms=1000)
    _subscribe(consumer, topic, {0})
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=500)
    print(f"before: assignment {sorted(tp.partition for tp in consumer.assignment())}")
    admin.create_partitions({topic: NewPartitions(total_count=2)})
    started, cpu, polls = time.monotonic(), time.process_time(), 0
    while len(consumer.assignment()) < 2 and time.monotonic() - started < 10:
        consumer.poll(timeout_ms=poll_ms)
        polls += 1
    coordinator: Any = consumer._coordinator  # what the client believes, for the report
    print(f"poll({poll_ms} ms) for {time.monotonic() - started:.1f} s, {polls} polls, "
          f"client CPU {time.process_time() - cpu:.1f} s: assignment "
          f"{sorted(tp.partition for tp in consumer.assignment())}, generation "
          f"{coordinator._generation.generation_id}, state {coordinator.state}")
    applied = len(consumer.assignment()) == 2
    consumer.close()
    admin.close()
    return applied


class _Delays:
    """Random sleeps in kafka-python's threads while a run's consumer starts."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.active = threading.Event()
        apply: Callable[..., Any] = ClusterMetadata.update_metadata
        subscribe: Callable[..., Any] = SubscriptionState.subscribe

        def slow_apply(cluster: ClusterMetadata, response: Any) -> Any:
            if self.active.is_set() and self.rng.random() < 0.5:
                time.sleep(self.rng.uniform(0, 0.3))
            return apply(cluster, response)

        def slow_subscribe(state: SubscriptionState, *args: Any, **kwargs: Any) -> Any:
            if self.active.is_set():
                time.sleep(self.rng.uniform(0, 0.05))
            return subscribe(state, *args, **kwargs)

        ClusterMetadata.update_metadata = slow_apply
        SubscriptionState.subscribe = slow_subscribe


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.empty_assignments = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("No partition metadata for topic"):
            self.empty_assignments += 1


def first_assignment(bootstrap: str, runs: int, seed: int, pattern: str) -> int:
    """Runs that read nothing in 10 s."""
    delays, warnings = _Delays(seed), _Warnings()
    logging.getLogger("kafka.coordinator.assignors").addHandler(warnings)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=(3, 7))
    lost = 0
    for run in range(runs):
        topic = f"first-assignment-{time.monotonic_ns()}"
        admin.create_topics([NewTopic(topic, 1, 1)])
        producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(3, 7), acks="all")
        for i in range(3):
            producer.send(topic, value=b"v%d" % i).get(timeout=30)
        producer.close()
        before = warnings.empty_assignments
        delays.active.set()
        settings: dict[str, Any] = dict(
            bootstrap_servers=bootstrap, api_version=(3, 7), group_id=f"{topic}-g",
            auto_offset_reset="earliest", enable_auto_commit=False, request_timeout_ms=20_000)
        if pattern == "old":
            consumer = KafkaConsumer(topic, **settings)
        else:
            consumer = KafkaConsumer(**settings)
            _subscribe(consumer, topic, {0})
        started, cpu, got = time.monotonic(), time.process_time(), 0
        while got < 3 and time.monotonic() - started < 10:
            got += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        delays.active.clear()
        lost += got < 3
        print(f"run {run}: read {got} of 3 in {time.monotonic() - started:.1f} s, client CPU "
              f"{time.process_time() - cpu:.1f} s, first assignment "
              f"{'empty' if warnings.empty_assignments > before else 'with the partition'}")
        consumer.close()
    admin.close()
    print(f"pattern {pattern}: {warnings.empty_assignments} of {runs} first assignments without "
          f"the topic's partitions, {lost} of {runs} runs read nothing")
    return lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reference.kafka_python_races")
    parser.add_argument("race", choices=["lost-rebalance", "first-assignment"])
    parser.add_argument("--against", choices=["floodmark", "kafka"], default="floodmark")
    parser.add_argument("--poll-ms", type=int, default=1)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pattern", choices=["old", "subscribe"], default="old")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafka-python-races-") as scratch, \
            _broker(args.against, Path(scratch)) as bootstrap:
        if args.race == "lost-rebalance":
            lost_rebalance(bootstrap, args.poll_ms)
        else:
            first_assignment(bootstrap, args.runs, args.seed, args.pattern)
    return 0


if __name__ == "__main__":
    sys.exit(main())
