"""Admin requests never block a broker's event loop (issue 11): with the active controller of a
3-controller quorum SIGSTOPped, a CreateTopics sent to the broker waits for a controller, while
Produce and Fetch on the same broker keep being answered.

Real processes: three controllers, one broker; confluent-kafka's admin client, producer and
consumer all bootstrap from that broker alone. Progress is measured, not time: while the
CreateTopics is still unanswered, the producer gets 100 more acknowledgements and the consumer
reads them back. (Before, the broker's handler made a blocking call to the stopped controller:
every other request of that broker, on every connection, waited behind it.)
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from tests.cluster.helpers import wait_until

MORE = 100
DELETE_TIMEOUT_S = 3.0  # the DeleteTopics request's timeout_ms, with the controller stopped


def test_create_topics_waits_for_a_stopped_controller_while_produce_and_fetch_go_on(
        tmp_path: Path) -> None:
    # The window this test measures in ends when the other controllers elect a new active one
    # (controller.quorum.fetch.timeout.ms after the stop): long, so that it is the 100 round trips
    # that end it, however slowly a loaded machine runs them, and not a clock. The broker's session
    # outlasts the stop too (no fencing when the stopped controller resumes).
    cluster = LocalCluster(tmp_path, brokers=1, controllers=3, controller_settings={
        "controller.quorum.fetch.timeout.ms": "120000",
        "broker.session.timeout.ms": "120000"}).start()
    stopped: int | None = None
    try:
        bootstrap = cluster.address(cluster.broker_ids[0])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("busy", 1, 1)])["busy"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 0})
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "nonblocking",
                             "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10})
        consumer.subscribe(["busy"])
        acked: list[int] = []
        read: list[int] = []
        done = threading.Event()

        def produce() -> None:
            deadline = time.monotonic() + 120
            i = 0
            while not done.is_set() and time.monotonic() < deadline and i < 20_000:
                producer.produce("busy", str(i).encode(), on_delivery=lambda err, msg: (
                    acked.append(msg.offset()) if err is None else None))
                producer.flush(10)
                i += 1

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()

        def consume_until(count: int) -> bool:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                read.append(msg.offset())
            return len(read) >= count

        wait_until(lambda: consume_until(10), 60, "the consumer reads", step_s=0)

        stopped = cluster.active_controller()
        assert stopped is not None
        cluster.kill(stopped, signal.SIGSTOP)
        created = admin.create_topics([NewTopic("during", 1, 1)], request_timeout=120)["during"]
        time.sleep(0.2)  # the request reaches the broker (it is then waiting on the controller)
        acked_at_start, read_at_start = len(acked), len(read)
        while not created.done() and not (len(acked) >= acked_at_start + MORE
                                         and len(read) >= read_at_start + MORE):
            consume_until(0)
            assert writer.is_alive(), "the producer stopped"
        assert not created.done(), (
            f"CreateTopics was answered before {MORE} produce/fetch round trips "
            f"(acked {len(acked) - acked_at_start}, read {len(read) - read_at_start})")

        cluster.kill(stopped, signal.SIGCONT)
        stopped = None
        created.result(60)  # the new active controller (or the resumed one) created it
        assert "during" in admin.list_topics(timeout=10).topics
        done.set()
        writer.join(30)
        wait_until(lambda: consume_until(len(acked)), 60, "every acknowledged record read",
                   step_s=0)
        assert sorted(set(read)) == sorted(acked)
        consumer.close()
    finally:
        if stopped is not None:
            cluster.kill(stopped, signal.SIGCONT)
        cluster.stop()


def test_delete_topics_the_controller_never_decides_keeps_the_replicas(tmp_path: Path) -> None:
    # A cluster broker removed its replicas of the topic first, then asked the controller:
    # with the controller stopped, DeleteTopics failed and the topic stayed, without its data.
    from floodmark.controller.client import ADMIN_TIMEOUT_S
    from tests.cluster.helpers import start_cluster

    cluster = start_cluster(tmp_path, brokers=1)
    controller = cluster.controller_ids[0]
    stopped = False
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("keep", 1, 1)])["keep"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True})
        for i in range(10):
            producer.produce("keep", str(i).encode())
        assert producer.flush(30) == 0
        cluster.kill(controller, signal.SIGSTOP)
        stopped = True
        # The request's timeout_ms (the admin's operation_timeout) bounds the broker's wait for
        # the controller, as in Kafka; its own bound for a call to the controller is longer.
        asked = time.monotonic()
        deleted = admin.delete_topics(["keep"], operation_timeout=DELETE_TIMEOUT_S,
                                      request_timeout=ADMIN_TIMEOUT_S + 30)["keep"]
        try:
            deleted.result(ADMIN_TIMEOUT_S + 30)
            raise AssertionError("DeleteTopics succeeded with the controller stopped")
        except Exception as exc:  # the broker's answer: REQUEST_TIMED_OUT
            assert "REQUEST_TIMED_OUT" in str(exc) or "timed out" in str(exc).lower(), exc
        assert time.monotonic() - asked < ADMIN_TIMEOUT_S, "timeout_ms was not the bound"
        replica = cluster.partition_dir(cluster.broker_ids[0], "keep")
        assert replica.is_dir()  # nothing decided, nothing removed
        # The data is still served while the controller is stopped.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "keep",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition("keep", 0, 0)])
        seen: list[bytes] = []

        def read() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(bytes(msg.value() or b""))
            return len(seen) >= 10

        wait_until(read, 60, "the 10 records of the topic the controller did not delete",
                   step_s=0)
        consumer.close()
        assert seen == [str(i).encode() for i in range(10)]
        # Resumed, the controller may still carry out the request it had received (a timed-out
        # request is not an undone one, as in Kafka): the replica goes only with the topic.
        cluster.kill(controller, signal.SIGCONT)
        stopped = False

        def consistent() -> bool:
            listed = "keep" in admin.list_topics(timeout=10).topics
            return listed == replica.is_dir()

        wait_until(consistent, 60, "metadata and replica agreeing")
    finally:
        if stopped:
            cluster.kill(controller, signal.SIGCONT)
        cluster.stop()
