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
