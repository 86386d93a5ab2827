"""Topics the write benchmarks share: one created with replication factor 3 and
``min.insync.replicas`` 2, ready once every partition has a leader and its full ISR; and how
many records its partitions hold (the sum of their high watermarks)."""

from __future__ import annotations

import time

from floodmark.client.fetch import FetchClient


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})]
                        )[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leader or full ISR for every partition")


def written(bootstrap: str, topic: str, partitions: int) -> int:
    client = FetchClient(bootstrap)
    try:
        return sum(client.bounds(topic, p).high_watermark for p in range(partitions))
    finally:
        client.close()
