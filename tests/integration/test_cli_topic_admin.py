"""``floodmark topic add-partitions|alter --partitions`` (CreatePartitions) and ``topic list``'s
kafka-topics.sh filters, against a real broker process (the commands run in this process:
``floodmark.cli.main.main``, real sockets)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from tests.integration.conftest import Run

pytestmark = pytest.mark.integration


@pytest.fixture
def fm(fm_in_process: Run) -> Run:
    """``fm(*argv) -> (exit status, stdout, stderr)`` (tests/integration/conftest.py)."""
    return fm_in_process


def partition_count(fm: Run, topic: str) -> int:
    rc, out, err = fm("topic", "list", "--json")
    assert rc == 0, err
    return next(t["partitions"] for t in json.loads(out) if t["topic"] == topic)


def test_add_partitions_and_alter(broker, fm: Run) -> None:
    assert fm("topic", "create", "grow", "--partitions", "1")[0] == 0
    rc, out, err = fm("topic", "add-partitions", "grow", "--partitions", "3")
    assert rc == 0, err
    assert out.strip() == "topic grow now has 3 partition(s)"
    deadline = time.monotonic() + 20
    while partition_count(fm, "grow") != 3:  # the metadata reaches this broker
        assert time.monotonic() < deadline, "the new partitions never showed"
        time.sleep(0.1)
    rc, _out, err = fm("topic", "alter", "grow", "--partitions", "4")  # kafka-topics.sh's form
    assert rc == 0, err
    deadline = time.monotonic() + 20
    while partition_count(fm, "grow") != 4:
        assert time.monotonic() < deadline, "the new partition never showed"
        time.sleep(0.1)
    # The new partition takes writes from a real client.
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("grow", value=b"x", partition=3)
    assert p.flush(20) == 0

    # Fewer partitions, or an unknown topic: the broker's code and its message, one line.
    rc, _out, err = fm("topic", "add-partitions", "grow", "--partitions", "2")
    assert rc == 1 and "INVALID_PARTITIONS" in err and len(err.strip().splitlines()) == 1
    assert "has 4 partitions" in err, err  # the broker's message beside the code
    rc, _out, err = fm("topic", "add-partitions", "nope", "--partitions", "2")
    assert rc == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and "Traceback" not in err
    rc, _out, err = fm("topic", "add-partitions", "grow", "--partitions", "0")
    assert rc == 1 and "at least one partition" in err


def test_list_filters(fm: Run) -> None:
    assert fm("topic", "create", "weak", "--partitions", "2",
              "--config", "min.insync.replicas=2")[0] == 0
    assert fm("topic", "create", "fine", "--partitions", "1")[0] == 0
    rc, out, err = fm("topic", "list", "--under-min-isr-partitions", "--json")
    assert rc == 0, err
    assert json.loads(out) == [{"topic": "weak", "partition": p, "leader": 1, "replicas": [1],
                                "isr": [1]} for p in (0, 1)]
    rc, out, _err = fm("topic", "list", "--under-min-isr-partitions")
    assert out.splitlines() == [f"Topic: weak\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1"
                                for p in (0, 1)]
    rc, out, _err = fm("topic", "list", "--at-min-isr-partitions", "--json")
    assert {(r["topic"], r["partition"]) for r in json.loads(out)} >= {("fine", 0)}
    assert "weak" not in {r["topic"] for r in json.loads(out)}
    # One healthy broker: nothing under-replicated, nothing unavailable.
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        rc, out, err = fm("topic", "list", flag, "--json")
        assert rc == 0 and json.loads(out) == [], err
