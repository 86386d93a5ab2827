"""The client side of the leader-isolation test, run inside the lab's client namespace.

Creates the topic (RF=3, min.insync.replicas=2), reports the partition leader, then writes with
confluent-kafka (acks=all, idempotent) at a bounded rate, printing progress as JSON lines. On
"stop" from stdin it flushes, reads the whole partition back with a fresh consumer and prints the
result: every acknowledged (offset, value) and the ones missing from the log, and the longest
time between two acknowledgements (with its start and end on the machine's monotonic clock)."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.chaos.readback import read_partition

TOPIC = "isolated"


def say(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    bootstrap, request_timeout_ms = sys.argv[1], int(sys.argv[2])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    while True:
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
                                )[TOPIC].result(10)
            break
        except Exception as exc:  # brokers still registering
            if "already exists" in str(exc):
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    leader = -1
    while leader < 0 and time.monotonic() < deadline:
        md = admin.list_topics(TOPIC, timeout=10)
        leader = md.topics[TOPIC].partitions[0].leader
        time.sleep(0.2)
    say(event="leader", id=leader)

    acked: dict[str, int] = {}
    gap = {"last": 0.0, "longest_s": 0.0, "start": 0.0, "end": 0.0}  # between acknowledgements
    failed: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()

    def on_delivery(err: Any, msg: Any) -> None:
        with lock:
            if err is None:
                acked[msg.value().decode()] = msg.offset()
                now = time.monotonic()  # CLOCK_MONOTONIC: the same in every namespace
                if gap["last"] and now - gap["last"] > gap["longest_s"]:
                    gap.update(longest_s=now - gap["last"], start=gap["last"], end=now)
                gap["last"] = now
            else:
                failed.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "request.timeout.ms": request_timeout_ms,
                         "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000})
    i = 0
    last = time.monotonic()
    fatal = ""
    while not stop.is_set() and i < 100_000:
        try:
            if not fatal:
                producer.produce(TOPIC, value=f"v{i:06d}".encode(), partition=0,
                                 on_delivery=on_delivery)
                i += 1
            producer.poll(0.005)  # about 200 records/s
        except KafkaException as exc:  # e.g. OUT_OF_ORDER_SEQUENCE_NUMBER: fatal for librdkafka
            fatal = str(exc)
        if time.monotonic() - last >= 0.5:
            last = time.monotonic()
            with lock:
                say(event="progress", sent=i, acked=len(acked), failed=len(failed), fatal=fatal)
    try:
        if fatal:
            producer.purge()  # a fatal producer delivers nothing more: do not wait for it
        left = producer.flush(150)
    except KafkaException as exc:
        fatal, left = fatal or str(exc), -1
    raw = read_partition(bootstrap, TOPIC, timeout_s=90)
    values = {o: (v or b"").decode() for o, v in raw.items()}
    lost = sorted((o, v) for v, o in acked.items() if values.get(o) != v)
    duplicates = len(values) - len(set(values.values()))
    say(event="result", sent=i, acked=len(acked), failed=len(failed), failures=failed[:5],
        unflushed=left, fatal=fatal, read=len(values), lost=len(lost), lost_sample=lost[:10],
        duplicates=duplicates, longest_ack_gap_s=round(gap["longest_s"], 3),
        longest_ack_gap=[gap["start"], gap["end"]])


if __name__ == "__main__":
    main()
