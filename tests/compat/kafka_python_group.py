"""kafka-python group consumers that subscribe the way an application must with kafka-python
3.0.12: bootstrapped, then subscribed, then polling only once the consumer's own metadata lists
the topic's partitions (see ``subscribe_when_known`` for the two client races this avoids, and
``tests/reference/kafka_python_races.py`` for their reproduction against floodmark and Kafka)."""

from __future__ import annotations

import time

from kafka import KafkaConsumer


def subscribe_when_known(consumer: KafkaConsumer, topic: str, partitions: set[int],
               timeout_s: float = 30.0) -> None:
    """Subscribe a group consumer and return once its own metadata lists the topic's
    partitions, so that the group's first assignment is made from them: what an application
    waits for before it polls a topic another client has just created.

    Without it kafka-python 3.0.12 can lose the topic for good, against floodmark and against
    Kafka 4.1 alike (both answer every request of the sequence the same way; issue 23):

    1. A consumer pinned to a release (``api_version``) does not bootstrap in its constructor:
       its IO thread does, while the constructor subscribes. A Metadata request built before
       the subscription (no topics) is still in flight when ``set_topics`` asks for an update,
       and its answer settles that update (kafka-python's own TODO in ``set_topics``). The
       leader's first assignment then finds no partitions ("No partition metadata for topic")
       and assigns none. An unpinned consumer bootstraps in its constructor, but the refresh
       its coordinator asks for next waits only ``retry_backoff_ms`` (100 ms): a constructor
       slower than that to subscribe (a loaded machine) meets the same race.
    2. The next Metadata answer shows the partition and the leader rejoins. Its JoinGroup and
       SyncGroup run as a background task; when they finish after the caller's ``poll`` timer
       ran out, no later poll applies the assignment (``join_group_async`` consumes a finished
       join only while ``need_rejoin()``, which the new assignment already made false). The
       consumer keeps the empty assignment with heartbeats off, and ``poll`` spins: with the
       heartbeat overdue it no longer sleeps.

    ``bootstrap`` first leaves no Metadata request in flight when the subscription asks for
    one (what an unpinned consumer's constructor does), and the wait below makes the first
    assignment see the partitions, so the leader never has a metadata change to rejoin for."""
    consumer.bootstrap(timeout_ms=int(timeout_s * 1000))
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout_s
    seen = consumer.partitions_for_topic(topic)  # a Metadata round trip while the topic is unknown
    while seen != partitions and time.monotonic() < deadline:
        consumer.topics()  # one more Metadata round trip (at most one per retry_backoff_ms)
        seen = consumer.partitions_for_topic(topic)
    assert seen == partitions, f"the consumer's metadata shows partitions {seen} of {topic}"
