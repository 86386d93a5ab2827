"""``floodmark topic|produce|consume`` against a real broker process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from floodmark.ports import free_port

pytestmark = pytest.mark.integration


def fm(*args: str, stdin: str | None = None, timeout: float = 60) -> str:
    out = subprocess.run([sys.executable, "-m", "floodmark.cli", *args], input=stdin,
                         capture_output=True, text=True, timeout=timeout, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_topic_produce_consume_roundtrip(broker) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    assert "created topic cli-demo" in fm("topic", "create", "cli-demo", "--partitions", "2", *bs)
    assert "cli-demo" in fm("topic", "list", *bs).split()
    lines = [f"key{i % 3}|value-{i}" for i in range(50)]
    fm("produce", "cli-demo", "--key-separator", "|", "--acks", "all", *bs,
       stdin="\n".join(lines) + "\n")
    got = fm("consume", "cli-demo", "--from-beginning", "--max-messages", "50", "--print-key",
             "--key-separator", "|", *bs)
    assert sorted(got.splitlines()) == sorted(lines)

    desc = json.loads(fm("topic", "describe", "cli-demo", "--json", *bs))
    parts = desc["partitions"]
    assert len(parts) == 2
    assert sum(p["high_watermark"] for p in parts) == 50
    for p in parts:
        assert p["leader"] == 1 and p["isr"] == [1] and p["leader_epoch"] == 0
        assert p["log_end_offset"] == p["high_watermark"] and p["log_start_offset"] == 0
        assert p["epoch_cache"] == [{"epoch": 0, "start_offset": 0}]

    # A group consumes everything once, commits, and a second run finds nothing new.
    first = fm("consume", "cli-demo", "--group", "cli-g", "--from-beginning",
               "--timeout-ms", "1500", *bs)
    assert len(first.splitlines()) == 50
    second = fm("consume", "cli-demo", "--group", "cli-g", "--timeout-ms", "1000", *bs)
    assert second == ""

    assert "deleted topic cli-demo" in fm("topic", "delete", "cli-demo", *bs)
    assert "cli-demo" not in fm("topic", "list", *bs).split()


def test_group_and_config_tools(broker) -> None:
    """``floodmark group list|describe|reset-offsets|delete`` (kafka-consumer-groups.sh's
    columns), ``topic alter-config`` and ``--version``."""
    bs = ["--bootstrap-server", broker.bootstrap]
    assert fm("--version").startswith("floodmark ")
    fm("topic", "create", "gt", "--partitions", "2", *bs)
    fm("produce", "gt", *bs, stdin="".join(f"v{i}\n" for i in range(20)))
    got = fm("consume", "gt", "--group", "gt-group", "--from-beginning", "--max-messages", "12",
             *bs)
    assert len(got.splitlines()) == 12
    assert "gt-group" in fm("group", "list", *bs)
    desc = json.loads(fm("group", "describe", "gt-group", "--json", *bs))
    rows = desc["partitions"]
    assert sum(r["log_end_offset"] for r in rows) == 20
    assert sum(r["lag"] for r in rows) == 8 and desc["state"] == "Empty"
    plan = fm("group", "reset-offsets", "gt-group", "--topic", "gt", "--to-earliest", *bs)
    assert "add --execute" in plan
    fm("group", "reset-offsets", "gt-group", "--topic", "gt", "--to-earliest", "--execute", *bs)
    rows = json.loads(fm("group", "describe", "gt-group", "--json", *bs))["partitions"]
    assert [r["current_offset"] for r in rows] == [0, 0] and sum(r["lag"] for r in rows) == 20
    fm("group", "reset-offsets", "gt-group", "--topic", "gt", "--to-datetime",
       "2999-01-01T00:00:00+00:00", "--execute", *bs)
    rows = json.loads(fm("group", "describe", "gt-group", "--json", *bs))["partitions"]
    assert sum(r["lag"] for r in rows) == 0  # later than every record: the log end
    assert "deleted group gt-group" in fm("group", "delete", "gt-group", *bs)
    assert "gt-group" not in fm("group", "list", *bs)

    fm("topic", "alter-config", "gt", "--set", "retention.ms=60000", *bs)
    desc = json.loads(fm("topic", "describe", "gt", "--json", *bs))
    assert desc["configs"]["retention.ms"] == "60000"
    fm("topic", "alter-config", "gt", "--delete", "retention.ms", *bs)
    assert "retention.ms" not in json.loads(fm("topic", "describe", "gt", "--json", *bs))[
        "configs"]
    # kafka-configs.sh's flags: comma-separated, a list value in brackets
    fm("topic", "alter-config", "gt", "--add-config",
       "retention.ms=70000,cleanup.policy=[compact,delete]", *bs)
    configs = json.loads(fm("topic", "describe", "gt", "--json", *bs))["configs"]
    assert configs["retention.ms"] == "70000" and configs["cleanup.policy"] == "compact,delete"
    fm("topic", "alter-config", "gt", "--delete-config", "retention.ms,cleanup.policy", *bs)
    configs = json.loads(fm("topic", "describe", "gt", "--json", *bs))["configs"]
    assert "retention.ms" not in configs and "cleanup.policy" not in configs


def test_consume_shows_partition_offset_headers_and_starts_at_an_offset(broker, tmp_path) -> None:
    """``produce --file --header`` and ``consume --partition --offset --print-* --format --json``
    (issue 12 item 5), checked against what confluent-kafka reads from the same topic."""
    from confluent_kafka import Consumer, TopicPartition

    from floodmark.client.partitioner import partition_for_key

    bs = ["--bootstrap-server", broker.bootstrap]
    fm("topic", "create", "hdr", "--partitions", "2", *bs)
    lines = [(f"k{i % 5}", f"v{i}") for i in range(40)]
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"{k}|{v}\n" for k, v in lines))
    out = subprocess.run([sys.executable, "-m", "floodmark.cli", "produce", "hdr", "--file",
                          str(path), "--key-separator", "|", "--header", "src=cli", "--header",
                          "trace=7", "--progress", "--batch-size", "7", *bs],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "100%" in out.stderr and "produced 40 record(s)" in out.stderr  # rich's bar
    expected: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
    for k, v in lines:
        expected[partition_for_key(k.encode(), 2)].append((k, v))
    assert expected[0] and expected[1]

    # kafka-console-consumer's fields, in its order, from offset 2 of one partition.
    got = fm("consume", "hdr", "--partition", "1", "--offset", "2", "--max-messages", "3",
             "--print-timestamp", "--print-partition", "--print-offset", "--print-headers",
             "--print-key", *bs).splitlines()
    assert len(got) == 3
    for i, line in enumerate(got):
        ts, part, off, headers, key, value = line.split("\t")
        assert ts.startswith("CreateTime:") and int(ts.split(":")[1]) > 0
        assert (part, off, headers) == ("Partition:1", f"Offset:{2 + i}", "src=cli,trace=7")
        assert (key, value) == expected[1][2 + i]

    # kcat's format string; -N: N records before the end of each partition.
    tail = fm("consume", "hdr", "--offset", "-2", "--format", r"%t %p %o %k=%s [%h]\n",
              "--max-messages", "4", *bs).splitlines()
    want = {f"hdr {p} {len(expected[p]) - 2 + j} {expected[p][-2 + j][0]}="
            f"{expected[p][-2 + j][1]} [src=cli,trace=7]" for p in (0, 1) for j in (0, 1)}
    assert set(tail) == want

    rows = [json.loads(x) for x in fm("consume", "hdr", "--from-beginning", "--json",
                                      "--max-messages", "40", *bs).splitlines()]
    assert len(rows) == 40
    for p in (0, 1):
        mine = [r for r in rows if r["partition"] == p]
        assert [r["offset"] for r in mine] == list(range(len(expected[p])))
        assert [(r["key"], r["value"]) for r in mine] == expected[p]
    assert all(r["headers"] == [["src", "cli"], ["trace", "7"]] for r in rows)
    assert fm("consume", "hdr", "--offset", "latest", "--timeout-ms", "800", *bs) == ""

    # A real client sees the same partitions, offsets and headers.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "hdr-check",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("hdr", p, 0) for p in (0, 1)])
        seen = {}
        deadline = time.monotonic() + 30
        while len(seen) < 40 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen[(m.partition(), m.offset())] = (m.key().decode(), m.value().decode(),
                                                     m.headers())
    finally:
        c.close()
    assert {(r["partition"], r["offset"]): (r["key"], r["value"], [("src", b"cli"),
                                                                    ("trace", b"7")])
            for r in rows} == seen


def test_produce_acks_0_and_1_and_unkeyed_batches_move_on(broker) -> None:
    """``--acks 0`` (no answer) and ``--acks 1`` go through the one producer without a producer
    id; every record arrives. Unkeyed lines fill one partition per batch, then the next (the
    sticky partitioner), so 3 batches of 4 lines land as 4 + 4 + 4 over 3 partitions."""
    from confluent_kafka import Consumer, TopicPartition

    bs = ["--bootstrap-server", broker.bootstrap]
    fm("topic", "create", "acks", "--partitions", "3", *bs)
    for acks in ("0", "1"):
        out = subprocess.run([sys.executable, "-m", "floodmark.cli", "produce", "acks",
                              "--acks", acks, "--batch-size", "4", *bs],
                             input="".join(f"{acks}-{i}\n" for i in range(12)),
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert "produced 12 record(s) to acks" in out.stderr
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "acks-check",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("acks", p, 0) for p in range(3)])
        seen: dict[int, list[tuple[int, bytes]]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        while sum(map(len, seen.values())) < 24 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen[m.partition()].append((m.offset(), m.value()))
                assert m.key() is None
    finally:
        c.close()
    values = sorted(v for rows in seen.values() for _, v in rows)
    assert values == sorted(f"{a}-{i}".encode() for a in "01" for i in range(12))
    assert sorted(len(rows) for rows in seen.values()) == [8, 8, 8]
    for rows in seen.values():  # each partition holds one batch of 4 consecutive lines a run
        assert [o for o, _ in rows] == list(range(8))
        for run in (rows[:4], rows[4:]):
            first = int(run[0][1].split(b"-")[1])
            assert [v for _, v in run] == [v.rsplit(b"-", 1)[0] + b"-%d" % (first + j)
                                           for j, (_, v) in enumerate(run)]


def test_listings_as_json_and_bootstrap_from_the_environment(broker) -> None:
    env_run = subprocess.run([sys.executable, "-m", "floodmark.cli", "topic", "list", "--json"],
                             capture_output=True, text=True, timeout=60, check=False,
                             env={**os.environ, "FLOODMARK_BOOTSTRAP": broker.bootstrap})
    assert env_run.returncode == 0, env_run.stderr
    fm("topic", "create", "js", "--partitions", "3", "--bootstrap-server", broker.bootstrap)
    listed = {t["topic"]: t for t in json.loads(subprocess.run(
        [sys.executable, "-m", "floodmark.cli", "topic", "list", "--json"], capture_output=True,
        text=True, timeout=60, check=True,
        env={**os.environ, "FLOODMARK_BOOTSTRAP": broker.bootstrap}).stdout)}
    assert listed["js"] == {"topic": "js", "partitions": 3, "internal": False}
    assert listed["__consumer_offsets"]["internal"] is True
    groups = json.loads(fm("group", "list", "--json", "--bootstrap-server", broker.bootstrap))
    assert isinstance(groups, list)
    plan = json.loads(fm("group", "reset-offsets", "js-g", "--topic", "js", "--to-offset", "5",
                         "--json", "--bootstrap-server", broker.bootstrap))
    # --to-offset is kept within [log start, log end], as kafka-consumer-groups.sh does.
    assert plan == [{"group": "js-g", "topic": "js", "partition": p, "new_offset": 0}
                    for p in range(3)]


def test_listen_port_alone_is_loopback_and_a_bad_port_is_one_line(tmp_path) -> None:
    """``floodmark ui --listen PORT`` serves on 127.0.0.1:PORT (floodmark.address's rule, the
    same as the broker's); a bad port, for the ui and the controller process, is one line."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "floodmark.cli", "ui", "--bootstrap", "127.0.0.1:1",
         "--listen", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the socket accepts
        assert line.strip() == f"floodmark ui listening on http://127.0.0.1:{port}/", (
            line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else ""))
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
    finally:
        proc.terminate()
        proc.wait(30)
    bad = [([sys.executable, "-m", "floodmark.cli", "ui", "--bootstrap", "127.0.0.1:1",
             "--listen", "99999"], "error: --listen '99999' is not HOST:PORT (port 0 to 65535)"),
           ([sys.executable, "-m", "floodmark.controller", "--data-dir", str(tmp_path / "c"),
             "--listen", "h:x"],
            "floodmark controller: --listen 'h:x' is not HOST:PORT (port 0 to 65535)"),
           ([sys.executable, "-m", "floodmark.controller", "--data-dir", str(tmp_path / "c"),
             "--metrics-listen", ":70000"],
            "floodmark controller: --metrics-listen ':70000' is not HOST:PORT (port 0 to 65535)")]
    for argv, want in bad:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                             stdin=subprocess.DEVNULL)
        assert out.returncode != 0 and out.stderr.strip() == want, (argv, out.stderr)
