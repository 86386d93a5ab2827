"""A soak: random fault schedules (SIGKILL, SIGSTOP past the session timeout, SIGTERM, restarts,
the controller too) under an idempotent acks=all producer and a concurrent consumer, then the
same checks as the scripted test. Slow; the seed is in the test id, and every action is logged.

    .venv/bin/pytest tests/cluster/test_random_faults.py -m slow -q
    FLOODMARK_SOAK_SEEDS=4,5,6,7 .venv/bin/pytest tests/cluster/test_random_faults.py -m slow -q
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import CONTROLLER_ID
from tests.cluster.helpers import (
    SESSION_TIMEOUT_MS,
    AckLog,
    consumer_thread,
    healed,
    isr_full,
    producer_thread,
    start_cluster,
    verify_after_healing,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TOPIC = "soak"
ACTIONS = 10


SEEDS = [int(x) for x in os.environ.get("FLOODMARK_SOAK_SEEDS", "1,2,3").split(",") if x]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_lose_nothing_acknowledged(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    cluster = start_cluster(tmp_path / "c")
    log: list[str] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                            )[TOPIC].result(20)
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 10, "a leader")
        acks = AckLog()
        seen: dict[int, bytes] = {}
        stop = threading.Event()
        producer = producer_thread(cluster.bootstrap, TOPIC, acks, stop)
        watcher = consumer_thread(cluster.bootstrap, TOPIC, seen, stop)
        wait_until(lambda: acks.count() > 100, 30, "warm-up")
        for _ in range(ACTIONS):
            leader = cluster.leader_of(TOPIC)
            target = rng.choice([leader, leader, *cluster.broker_ids, CONTROLLER_ID])
            if target < 0:
                target = rng.choice(cluster.broker_ids)
            kind = rng.choice(["KILL", "KILL", "STOP", "TERM"])
            if target == CONTROLLER_ID and kind == "TERM":
                kind = "KILL"
            log.append(f"{kind} node {target} (leader was {leader}) acks={acks.count()}")
            cluster.kill(target, getattr(signal, f"SIG{kind}"))
            time.sleep(rng.uniform(0.2, 2.5) * SESSION_TIMEOUT_MS / 1000)
            if kind == "STOP":
                cluster.kill(target, signal.SIGCONT)
            else:
                cluster.start_node(target)
            log.append(f"  node {target} back; acks={acks.count()}")
            wait_until(lambda: isr_full(cluster, TOPIC), 60, f"ISR full ({log})", 0.3)
        stop.set()
        producer.join(150)
        watcher.join(30)
        assert not producer.is_alive() and not watcher.is_alive()
        wait_until(lambda: healed(cluster, TOPIC), 60, "replicas identical", 0.3)
        verify_after_healing(cluster, TOPIC, acks, seen)
    except BaseException:
        print("\n".join(log))
        raise
    finally:
        cluster.stop()
