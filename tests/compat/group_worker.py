"""A kafka-python group consumer run as its own process by tests/compat/test_group_protocol.py
(so a test can freeze it with SIGSTOP or kill it with SIGKILL). It reads, commits after every
poll, and prints one JSON line per event: assigned/revoked partitions, records, commits.

Usage: python group_worker.py BOOTSTRAP GROUP TOPIC CLIENT_ID SESSION_MS MAX_POLL_MS
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.errors import KafkaError


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def on_partitions_revoked(self, revoked: Any) -> None:
        emit(event="revoked", partitions=sorted(tp.partition for tp in revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))


def main() -> int:
    bootstrap, group, topic, client_id, session_ms, max_poll_ms = sys.argv[1:7]
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
        auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=int(session_ms), max_poll_interval_ms=int(max_poll_ms),
        heartbeat_interval_ms=1000)
    consumer.subscribe([topic], listener=Listener())
    emit(event="started")
    while not stop:
        batches = consumer.poll(timeout_ms=100, max_records=50)
        for tp, records in batches.items():
            for r in records:
                emit(event="record", partition=tp.partition, offset=r.offset)
        if batches:
            try:
                consumer.commit()
                emit(event="commit", ok=True)
            except KafkaError as exc:  # fenced: a stale generation or a removed member
                emit(event="commit", ok=False, error=type(exc).__name__)
    consumer.close(autocommit=False)
    emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
