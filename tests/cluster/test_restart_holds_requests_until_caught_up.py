"""A restarted broker answers no request before its first metadata catch-up.

A broker binds its listeners before it registers with the controller (it registers their ports)
and reads the metadata log after that. Found by the coordinator-failover test under load: a
broker SIGKILLed and started again answered a consumer's Metadata request in that window, from
an empty image, without the subscribed topic; librdkafka dropped the topic from its
subscription, then saw it again and rebalanced the whole group. Kafka enables request
processing only after the broker's first catch-up; so does floodmark now.

Here the controllers are paused (SIGSTOP) while the broker starts again, so it is listening but
cannot catch up: a Metadata request sent then must not be answered from the empty image. Once
the controllers go on, the answer comes, and it names the topic with all its partitions."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.client import KafkaConnection
from tests.cluster.helpers import start_cluster, wait_progress, wait_until

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS = "held", 3
SHOW_BUG_S = 3.0
"""How long the request may go unanswered before the controllers resume: the window in which a
broker that answers from its empty image would have answered (it does so at once)."""

ALL_TOPICS = {"topics": None, "allow_auto_topic_creation": False,
              "include_cluster_authorized_operations": False,
              "include_topic_authorized_operations": False}


def test_a_restarted_broker_holds_metadata_requests_until_it_has_caught_up(
        tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "held-cluster")
    paused: list[int] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_until(lambda: all(cluster.leader_of(TOPIC, p) > 0 for p in range(PARTITIONS)),
                   30, "leaders")
        victim = cluster.broker_ids[0]
        log_path = cluster.log_path(victim)
        cluster.kill(victim)
        for c in cluster.controller_ids:
            cluster.kill(c, signal.SIGSTOP)
            paused.append(c)
        start = log_path.stat().st_size
        starter = threading.Thread(target=cluster.start_node, args=(victim,), daemon=True)
        starter.start()

        line = f"INFO floodmark.broker.broker: broker {victim} listening on".encode()

        def bound() -> bool:  # the INFO line: listeners bound, before it registers
            with open(log_path, "rb") as fh:
                fh.seek(start)
                return line in fh.read()
        wait_progress(bound, lambda: log_path.stat().st_size, 60, "the broker's listeners bound")

        answers: list[Any] = []
        errors: list[BaseException] = []

        def ask() -> None:
            try:
                with KafkaConnection(cluster.address(victim), timeout_s=90) as conn:
                    answers.append(conn.request(3, 12, ALL_TOPICS))
            except BaseException as exc:  # reported below
                errors.append(exc)
        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        asker.join(SHOW_BUG_S)
        answered_while_paused = bool(answers)
        for c in paused:
            cluster.kill(c, signal.SIGCONT)
        paused.clear()
        asker.join(90)
        assert not errors, errors
        assert answers, "no answer after the controllers resumed"
        topics = {t.name: len(t.partitions) for t in answers[0].topics}
        assert topics.get(TOPIC) == PARTITIONS, (
            f"answered {'while the controllers were paused' if answered_while_paused else ''}"
            f" without {TOPIC}'s {PARTITIONS} partitions: {topics}")
        starter.join(120)
        assert cluster.node_state(victim) != "dead"
    finally:
        for c in paused:
            cluster.kill(c, signal.SIGCONT)
        cluster.stop()
