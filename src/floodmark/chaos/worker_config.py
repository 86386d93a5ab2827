"""What every chaos worker builds its clients from: the topic spec, the confluent-kafka
consumer settings and the record form the history keeps (shared by ``workload`` and
``group_member``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from floodmark.chaos.history import value_id


def topics_of(spec: str) -> list[tuple[str, int]]:
    """``t1:2,t2:2`` -> [(t1, 0), (t1, 1), (t2, 0), (t2, 1)]."""
    out = []
    for item in spec.split(","):
        name, _, count = item.partition(":")
        out += [(name, p) for p in range(int(count or 1))]
    return out


def records_confluent(msgs: list[Any]) -> list[list[Any]]:
    return [[m.topic(), m.partition(), m.offset(), value_id(m.value())]
            for m in msgs if m.error() is None]


def confluent_config(args: argparse.Namespace, group: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 200, "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500, "socket.timeout.ms": 5000}
    if args.isolation:
        config["isolation.level"] = args.isolation
    if os.environ.get("FLOODMARK_CHAOS_RDKAFKA_DEBUG"):  # e.g. "topic,metadata,fetch"
        config["debug"] = os.environ["FLOODMARK_CHAOS_RDKAFKA_DEBUG"]
    return config
