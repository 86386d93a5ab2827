"""What every chaos worker builds its clients from: the topic spec, the confluent-kafka
consumer settings, the cluster's client security (``--command-config``: librdkafka's names, as
``cluster up`` writes them to ``D/client.properties``; the same settings in kafka-python's names)
and the record form the history keeps (shared by ``workload`` and ``group_member``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from floodmark.chaos.history import value_id
from floodmark.security import read_properties

KAFKA_PYTHON_NAMES = {
    "security.protocol": "security_protocol",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
}
"""librdkafka's client security settings -> kafka-python's arguments (its SCRAM login takes
the ``sasl_plain_*`` names too)."""


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


def security_properties(args: argparse.Namespace) -> dict[str, str]:
    """The clients' security settings in librdkafka's names (none for a plaintext cluster)."""
    path = getattr(args, "command_config", None)
    return read_properties(path) if path else {}


def kafka_python_security(args: argparse.Namespace) -> dict[str, Any]:
    """The same settings as kafka-python's keyword arguments. ValueError: a setting it has no
    name for (one line, never a value)."""
    out: dict[str, Any] = {}
    for name, value in security_properties(args).items():
        if name not in KAFKA_PYTHON_NAMES:
            raise ValueError(f"--command-config: {name} has no kafka-python equivalent here")
        out[KAFKA_PYTHON_NAMES[name]] = value
    return out


def confluent_config(args: argparse.Namespace, group: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        **security_properties(args),
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
