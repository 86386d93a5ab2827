"""``floodmark group reset-offsets`` in every kafka-consumer-groups.sh mode and scope, and
``group delete-offsets``, against a real broker process. The commands run in this process
(``floodmark.cli.main.main``: the same code as the console script, over real sockets) so that
each test stays short; one run goes through the console script to check its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from floodmark.cli.main import main
from tests.integration.conftest import Run

pytestmark = pytest.mark.integration


@pytest.fixture
def fm(fm_in_process: Run) -> Run:
    """``fm(*argv) -> (exit status, stdout, stderr)`` (tests/integration/conftest.py)."""
    return fm_in_process


def ok(run: Run, *argv: str) -> str:
    rc, out, err = run(*argv)
    assert rc == 0, err
    return out


def refused(run: Run, *argv: str) -> str:
    """A user mistake: exit 1, one line on stderr, no traceback."""
    rc, _out, err = run(*argv)
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def committed(run: Run, group: str) -> dict[int, int]:
    rows = json.loads(ok(run, "group", "describe", group, "--json"))["partitions"]
    return {r["partition"]: r["current_offset"] for r in rows}


def plan_of(out: str) -> dict[tuple[str, str, int], int]:
    return {(r["group"], r["topic"], r["partition"]): r["new_offset"] for r in json.loads(out)}


@pytest.fixture(scope="module")
def topic_ro(broker) -> Iterator[str]:
    """``ro``: 2 partitions, 10 records each (offsets 0..9), written a moment ago."""
    bs = ["--bootstrap-server", broker.bootstrap]
    assert main(["topic", "create", "ro", "--partitions", "2", *bs]) == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for p in (0, 1):
        for i in range(10):
            producer.produce("ro", value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0
    yield "ro"


def test_every_mode_moves_offsets_only_with_execute(fm: Run, topic_ro: str) -> None:
    ok(fm, "group", "reset-offsets", "g1", "--topic", "ro", "--to-offset", "4", "--execute")
    assert committed(fm, "g1") == {0: 4, 1: 4}

    # A plan changes nothing: --shift-by below the log start is clamped to it (as Kafka).
    out = ok(fm, "group", "reset-offsets", "g1", "--topic", "ro", "--shift-by", "-10", "--json")
    assert plan_of(out) == {("g1", "ro", 0): 0, ("g1", "ro", 1): 0}
    out = ok(fm, "group", "reset-offsets", "g1", "--topic", "ro", "--shift-by", "-1")
    assert "GROUP" in out and "NEW-OFFSET" in out and "add --execute" in out
    ok(fm, "group", "reset-offsets", "g1", "--topic", "ro", "--shift-by", "-1", "--dry-run")
    assert committed(fm, "g1") == {0: 4, 1: 4}

    # --topic T:P, --shift-by forward, clamped to the log end.
    ok(fm, "group", "reset-offsets", "g1", "--topic", "ro:1", "--shift-by", "3", "--execute")
    assert committed(fm, "g1") == {0: 4, 1: 7}
    out = ok(fm, "group", "reset-offsets", "g1", "--topic", "ro:1", "--shift-by", "30", "--json")
    assert plan_of(out) == {("g1", "ro", 1): 10}

    # --all-topics: the partitions the group has offsets for; --to-current keeps them.
    out = ok(fm, "group", "reset-offsets", "g1", "--all-topics", "--to-current", "--json")
    assert plan_of(out) == {("g1", "ro", 0): 4, ("g1", "ro", 1): 7}
    ok(fm, "group", "reset-offsets", "g1", "--topic", "ro:0", "--to-latest", "--execute")
    assert committed(fm, "g1") == {0: 10, 1: 7}
    ok(fm, "group", "reset-offsets", "g1", "--all-topics", "--to-earliest", "--execute")
    assert committed(fm, "g1") == {0: 0, 1: 0}

    # By time: the records were written a moment ago.
    out = ok(fm, "group", "reset-offsets", "g1", "--all-topics", "--to-datetime",
             "2000-01-01T00:00:00.000", "--json")
    assert set(plan_of(out).values()) == {0}
    out = ok(fm, "group", "reset-offsets", "g1", "--all-topics", "--to-datetime",
             "2999-01-01T00:00:00.000Z", "--json")
    assert set(plan_of(out).values()) == {10}  # later than every record: the log end
    out = ok(fm, "group", "reset-offsets", "g1", "--all-topics", "--by-duration", "P1D", "--json")
    assert set(plan_of(out).values()) == {0}
    time.sleep(0.01)  # a record's timestamp (ms) strictly before "now"
    out = ok(fm, "group", "reset-offsets", "g1", "--all-topics", "--by-duration", "PT0S",
             "--json")
    assert set(plan_of(out).values()) == {10}

    # A group with no offsets yet (Dead) may be given some, as Kafka's tool allows.
    out = ok(fm, "group", "reset-offsets", "fresh", "--topic", "ro", "--to-current", "--json")
    assert plan_of(out) == {("fresh", "ro", 0): 10, ("fresh", "ro", 1): 10}


def test_export_from_file_and_all_groups(fm: Run, topic_ro: str, tmp_path: Path) -> None:
    ok(fm, "group", "reset-offsets", "e1", "--topic", "ro", "--to-offset", "2", "--execute")
    ok(fm, "group", "reset-offsets", "e2", "--topic", "ro:1", "--to-offset", "5", "--execute")
    csv = ok(fm, "group", "reset-offsets", "e1", "--all-topics", "--to-current", "--export")
    assert csv == "ro,0,2\nro,1,2\n"  # only the CSV on stdout: a file --from-file reads
    plan = tmp_path / "plan.csv"
    plan.write_text("ro,0,6\nro,1,99\n")  # beyond the log end: kept within it, as Kafka
    out = ok(fm, "group", "reset-offsets", "e1", "--from-file", str(plan), "--json")
    assert plan_of(out) == {("e1", "ro", 0): 6, ("e1", "ro", 1): 10}
    plan.write_text("ro,0,6\nro,1,8\n")
    ok(fm, "group", "reset-offsets", "e1", "--from-file", str(plan), "--execute")
    assert committed(fm, "e1") == {0: 6, 1: 8}

    # --all-groups: every group, the group column in the export; read back with --from-file.
    csv = ok(fm, "group", "reset-offsets", "--all-groups", "--all-topics", "--to-earliest",
             "--export")
    lines = set(csv.splitlines())
    assert {"e1,ro,0,0", "e1,ro,1,0", "e2,ro,1,0"} <= lines
    plan.write_text("e1,ro,0,1\ne2,ro,1,3\n")
    ok(fm, "group", "reset-offsets", "--all-groups", "--from-file", str(plan), "--execute")
    assert committed(fm, "e1") == {0: 1, 1: 8} and committed(fm, "e2") == {1: 3}


def test_mistakes_are_one_line(fm: Run, topic_ro: str, tmp_path: Path) -> None:
    err = refused(fm, "group", "reset-offsets", "m", "--topic", "nope", "--to-earliest")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err
    err = refused(fm, "group", "reset-offsets", "m", "--topic", "ro:5", "--to-earliest")
    assert "2 partition(s)" in err
    err = refused(fm, "group", "reset-offsets", "m", "--topic", "ro", "--to-datetime", "yesterday")
    assert "--to-datetime" in err
    err = refused(fm, "group", "reset-offsets", "m", "--topic", "ro", "--by-duration", "1h")
    assert "--by-duration" in err
    err = refused(fm, "group", "reset-offsets", "m", "--topic", "ro", "--shift-by", "1")
    assert "no committed offset" in err
    err = refused(fm, "group", "reset-offsets", "m", "--all-topics", "--to-earliest")
    assert "no committed offsets" in err
    refused(fm, "group", "reset-offsets", "m", "--to-earliest")  # which partitions?
    refused(fm, "group", "reset-offsets", "--to-earliest", "--topic", "ro")  # which group?
    err = refused(fm, "group", "reset-offsets", "m", "--from-file", str(tmp_path / "none.csv"))
    assert "--from-file" in err
    (tmp_path / "other.csv").write_text("someone,ro,0,1\n")
    err = refused(fm, "group", "reset-offsets", "m", "--from-file", str(tmp_path / "other.csv"))
    assert "no offsets for group m" in err
    (tmp_path / "bad.csv").write_text("ro,zero,1\n")
    err = refused(fm, "group", "reset-offsets", "m", "--from-file", str(tmp_path / "bad.csv"))
    assert "line 1" in err
    err = refused(fm, "group", "delete-offsets", "no-such-group", "--topic", "ro")
    assert "GROUP_ID_NOT_FOUND" in err


def test_active_group_is_refused_and_delete_offsets(broker, fm: Run, topic_ro: str) -> None:
    ok(fm, "group", "reset-offsets", "act", "--topic", "ro", "--to-offset", "3", "--execute")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "act",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe(["ro"])
        deadline = time.monotonic() + 20
        while not consumer.assignment():  # progress: the group is Stable once assigned
            assert time.monotonic() < deadline, "the consumer got no assignment"
            consumer.poll(0.2)
        err = refused(fm, "group", "reset-offsets", "act", "--topic", "ro", "--to-earliest",
                      "--execute")
        assert "Stable" in err and "active members" in err
        rc, out, _err = fm("group", "delete-offsets", "act", "--topic", "ro:0")
        assert rc == 1 and "GROUP_SUBSCRIBED_TO_TOPIC" in out
    finally:
        consumer.close()
    assert committed(fm, "act") == {0: 3, 1: 3}
    out = ok(fm, "group", "delete-offsets", "act", "--topic", "ro:0")
    assert "ro 0 Successful" in out
    rows = json.loads(ok(fm, "group", "describe", "act", "--json"))["partitions"]
    assert {r["partition"]: r["current_offset"] for r in rows}.get(0, -1) == -1
    out = json.loads(ok(fm, "group", "delete-offsets", "act", "--topic", "ro", "--json"))
    assert out == [{"topic": "ro", "partition": 0, "error": None},
                   {"topic": "ro", "partition": 1, "error": None}]


def test_console_script_exit_status(broker, topic_ro: str) -> None:
    """The same refusal through the console script: exit 1, one line, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "floodmark.cli", "group", "reset-offsets", "x",
                           "--topic", "ro:9", "--to-earliest", "--bootstrap-server",
                           broker.bootstrap], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("error: --topic ro:9: ")
    assert len(proc.stderr.strip().splitlines()) == 1
