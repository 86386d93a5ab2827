"""``floodmark topic|produce|consume`` against a real broker process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
