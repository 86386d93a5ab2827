"""kcat 1.7.1 (Debian, librdkafka 2.0.2) against a real floodmark broker process.

kcat has no admin API, so the topic is created with confluent-kafka's AdminClient first.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.dataset import CODECS, TOPIC_CONFIGS

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (./dev setup)"),
]

TOPIC = "kcat-compat"
PARTITIONS = 2
BIG = ("0123456789abcdef" * 65536).encode()  # 1 MiB, printable so kcat's JSON keeps it exact


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 60) -> str:
    out = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout,
                         check=False)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out.stdout.decode()


def _lines(codec: str) -> list[tuple[str, str | None]]:
    return [(f"{codec}-key-{i}", None if i % 6 == 5 else f"{codec}-value-{i}") for i in range(20)]


def _consume_json(bootstrap: str, *extra: str) -> list[dict]:
    out = kcat("-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-J",
               "-X", "fetch.message.max.bytes=4194304", "-X", "fetch.max.bytes=8388608",
               "-X", "receive.message.max.bytes=16777216",
               *extra)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_kcat_full_flow(broker, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=TOPIC_CONFIGS)])[TOPIC].result(20)
    meta = kcat("-L", "-b", broker.bootstrap, "-t", TOPIC)
    assert f'topic "{TOPIC}" with {PARTITIONS} partitions' in meta

    expected: list[tuple[str | None, str | None, tuple[str, ...]]] = []
    for codec in CODECS:
        rows = _lines(codec)
        stdin = "".join(f"{k}\t{v or ''}\n" for k, v in rows).encode()
        kcat("-P", "-b", broker.bootstrap, "-t", TOPIC, "-K", "\t", "-Z", "-z", codec,
             "-H", f"codec={codec}", "-X", "acks=all", stdin=stdin)
        expected += [(k, v, ("codec", codec)) for k, v in rows]
    big = tmp_path / "big.bin"
    big.write_bytes(BIG)
    kcat("-P", "-b", broker.bootstrap, "-t", TOPIC, "-p", "0", "-X", "acks=all",
         "-X", "message.max.bytes=3000000", str(big))
    expected.append((None, BIG.decode(), ()))

    def as_rows(msgs: list[dict]) -> list[tuple[str | None, str | None, tuple[str, ...]]]:
        return sorted(((m["key"], m["payload"], tuple(m.get("headers") or ())) for m in msgs),
                      key=repr)

    got = _consume_json(broker.bootstrap)
    assert as_rows(got) == sorted(expected, key=repr)

    # Group consumption with commits (librdkafka commits on close with auto commit).
    out = kcat("-b", broker.bootstrap, "-G", "kcat-group", "-e", "-J", "-X",
               "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
               "-X", "fetch.max.bytes=8388608", "-X", "receive.message.max.bytes=16777216",
               TOPIC)
    group_rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert as_rows(group_rows) == sorted(expected, key=repr)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kcat-group"})
    committed = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    marks = [c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10) for p in range(PARTITIONS)]
    c.close()
    assert [t.offset for t in committed] == [hi for _, hi in marks]

    # List offsets: by timestamp 0 -> first offset; -1 (end) -> high watermark.
    q = kcat("-Q", "-b", broker.bootstrap, "-t", f"{TOPIC}:0:0", "-t", f"{TOPIC}:1:-1")
    assert "partition 0\toffset 0" in q.replace("  ", "\t") or "offset 0" in q
    assert f"offset {marks[1][1]}" in q

    broker.restart(crash=True)
    got = _consume_json(broker.bootstrap)
    assert as_rows(got) == sorted(expected, key=repr)
