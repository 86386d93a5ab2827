"""Issue 12, item 1: ``floodmark produce|consume|topic`` as real cluster clients — every
bootstrap address, partition leaders followed through a failover, Kafka's murmur2 partitioner
(the same partition as confluent-kafka's), and one-line errors for a bad or dead address."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from floodmark.client.partitioner import murmur2, partition_for_key
from tests.cluster.helpers import start_cluster, wait_until

pytestmark = pytest.mark.integration


def fm(*args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-m", "floodmark.cli", *args], input=stdin,
                         capture_output=True, text=True, timeout=120, check=False)
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def test_murmur2_is_kafkas() -> None:
    # Values of Kafka's Utils.murmur2 (org.apache.kafka.common.utils.UtilsTest).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_cli_follows_leaders_through_a_failover(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c")
    try:
        addrs = [cluster.address(n) for n in (1, 2, 3)]
        bs = ["--bootstrap-server", ",".join(addrs)]
        fm("topic", "create", "clu", "--partitions", "3", "--replication-factor", "3", *bs)
        lines = [f"k{i % 7}|v{i}" for i in range(60)]
        fm("produce", "clu", "--key-separator", "|", *bs, stdin="\n".join(lines) + "\n")
        got = fm("consume", "clu", "--from-beginning", "--max-messages", "60", "--print-key",
                 "--key-separator", "|", *bs).stdout
        assert sorted(got.splitlines()) == sorted(lines)

        # The CLI put each key where confluent-kafka (murmur2_random) puts it.
        seen: dict[bytes, int] = {}
        p = Producer({"bootstrap.servers": ",".join(addrs), "partitioner": "murmur2_random"})
        for i in range(7):
            key = b"k%d" % i
            p.produce("clu", key=key, value=b"x",
                      on_delivery=lambda err, m: seen.__setitem__(m.key(), m.partition()))
        assert p.flush(30) == 0
        assert seen == {k: partition_for_key(k, 3) for k in seen}

        # Broker 1 (the first bootstrap address) dies: every command still works.
        cluster.kill(1)
        wait_until(lambda: all(cluster.leader_of("clu", q) not in (-1, 1) for q in range(3)),
                   60, "leaders away from broker 1")
        assert "clu" in fm("topic", "list", *bs).stdout.split()
        more = [f"k{i % 7}|w{i}" for i in range(30)]
        fm("produce", "clu", "--key-separator", "|", *bs, stdin="\n".join(more) + "\n")
        got = fm("consume", "clu", "--from-beginning", "--max-messages", "90", *bs).stdout
        assert len(got.splitlines()) == 90
    finally:
        cluster.stop()


def test_one_line_errors_for_addresses() -> None:
    bad = fm("topic", "list", "--bootstrap-server", "localhost", ok=False)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "error: bootstrap address 'localhost' is not host:port"
    dead = fm("topic", "list", "--bootstrap-server", "127.0.0.1:1", ok=False)
    assert dead.returncode == 1 and "Traceback" not in dead.stderr
    assert dead.stderr.startswith("error: no broker answered: 127.0.0.1:1:")
    assert len(dead.stderr.strip().splitlines()) == 1
