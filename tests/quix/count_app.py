"""A Quix Streams application that counts its input per key, exactly once.

Run by tests/quix/test_quix_exactly_once.py with the Python of the separate Quix virtualenv
(quixstreams pins an older confluent-kafka than floodmark's tests): it imports neither floodmark
nor the tests. Every input record (key ``k<n>``, value the input's id) becomes one output record
``{"key", "id", "n"}`` where ``n`` is the key's running count kept in Quix's state store (RocksDB
with a changelog topic). With ``processing_guarantee="exactly-once"`` the state's changelog, the
output and the consumer offsets are written in one Kafka transaction per checkpoint.

    python count_app.py BOOTSTRAP INPUT OUTPUT STATE_DIR [SESSION_TIMEOUT_MS]
"""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application, State


def count(value: str, key: str, _timestamp: int, _headers: Any, state: State) -> dict[str, Any]:
    n = int(state.get("n", 0)) + 1
    state.set("n", n)
    return {"key": key, "id": value, "n": n}


def main() -> None:
    bootstrap, source, sink, state_dir = sys.argv[1:5]
    session_timeout_ms = int(sys.argv[5]) if len(sys.argv) > 5 else 6000
    app = Application(
        broker_address=bootstrap,
        consumer_group="quix-counter",
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        commit_interval=0.5,
        state_dir=state_dir,
        loglevel="INFO",
        # A broker SIGKILLed mid-run: librdkafka's own retries ride over the leader change.
        # One transactional.id for every start of the app (Quix draws a random one unless told):
        # a restarted app's InitProducerId fences its SIGKILLed incarnation and aborts the
        # transaction it left open at once, instead of leaving it to the coordinator's
        # transaction.timeout.ms (60 s), during which it holds back read_committed readers.
        producer_extra_config={"reconnect.backoff.max.ms": 500,
                               "topic.metadata.refresh.interval.ms": 1000,
                               "transactional.id": "count-app"},
        consumer_extra_config={"reconnect.backoff.max.ms": 500,
                               "session.timeout.ms": session_timeout_ms,
                               "topic.metadata.refresh.interval.ms": 1000},
    )
    inputs = app.topic(source, key_deserializer="str", value_deserializer="str")
    outputs = app.topic(sink, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(inputs)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(outputs)
    app.run()


if __name__ == "__main__":
    main()
