"""The live part of ``floodmark demo``: a real broker process, a real Kafka client, a SIGKILL.

It starts ``floodmark broker`` on a free loopback port with a throw-away data directory. It
creates a topic and produces numbered page-view events with acks=all and the idempotent
producer (confluent-kafka, i.e. librdkafka). It kills the broker with SIGKILL in the middle of
the stream and restarts it on the same port, and the producer keeps retrying. At the end a fresh
consumer reads the topic from the beginning, and the demo checks that every acknowledged event
is there exactly once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
TOPIC = "page-views"
EVENTS = 6000


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class _Broker:
    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "floodmark.cli",
                "broker",
                "--data-dir",
                str(self.data_dir),
                "--listen",
                f"127.0.0.1:{self.port}",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            match = _LISTENING.search(line)
            if match:
                self.port = int(match.group(2))
                return
        raise RuntimeError(f"broker did not start; see {self.log_path}")

    def stop(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


def live_broker_tour() -> bool:
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    except ImportError:
        _say("confluent-kafka is not installed; run ./dev setup")
        return False

    _say()
    _say("=" * 100)
    _say("6. A real broker process, a real Kafka client (librdkafka), and a SIGKILL mid-stream")
    _say("=" * 100)
    with tempfile.TemporaryDirectory(prefix="floodmark-demo-") as tmp:
        broker = _Broker(Path(tmp) / "data", Path(tmp) / "broker.log")
        broker.start()
        bootstrap = f"127.0.0.1:{broker.port}"
        _say(f"broker listening on {bootstrap}, data dir {broker.data_dir}")
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
            admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[
                TOPIC
            ].result(15)
            _say(f"created topic {TOPIC} with 3 partitions")
            acked: dict[str, tuple[int, int]] = {}
            failed: list[str] = []

            def on_delivery(err: Any, msg: Any) -> None:
                event_id = msg.key().decode()
                if err is None:
                    acked[event_id] = (msg.partition(), msg.offset())
                else:
                    failed.append(event_id)

            producer = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 60000,
                    "reconnect.backoff.max.ms": 500,
                    "log_level": 2,
                }
            )
            half = EVENTS // 2
            for n in range(EVENTS):
                event = {
                    "event_id": n,
                    "user": f"user-{n % 97}",
                    "page": f"/page/{n % 13}",
                    "ts_ms": 1_700_000_000_000 + n * 10,
                }
                producer.produce(
                    TOPIC,
                    key=str(n).encode(),
                    value=json.dumps(event).encode(),
                    on_delivery=on_delivery,
                )
                producer.poll(0.001)  # a steady stream (~1,000 events/s), not one burst
                if n == half:
                    producer.poll(0.05)  # requests are in flight: kill mid-stream, no flush
                    _say(
                        f"{len(acked)} events acknowledged; now SIGKILL the broker (no clean shutdown)"
                    )
                    broker.stop(signal.SIGKILL)
                    _say(
                        "broker killed; the producer keeps producing (librdkafka buffers and retries)"
                    )
                elif n == half + 300:
                    broker.start()
                    _say("broker restarted on the same port after crash recovery")
                elif n % 1000 == 0:
                    _say(f"  produced {n}, acknowledged {len(acked)}")
            from floodmark.demo.cluster import wait_on_progress

            wait_on_progress(lambda: producer.flush(0.5) == 0,
                             lambda: {"acknowledged": len(acked), "failed": len(failed)})
            _say(
                f"producer: {len(acked)} distinct events acknowledged, {len(failed)} delivery failures"
            )

            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "demo-check",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "log_level": 2,
                }
            )
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
            seen: dict[str, int] = {}
            positions: set[tuple[int, int]] = set()
            idle = 0  # reads until three polls in a row bring nothing (progress, not a clock)
            while idle < 3:
                batch = consumer.consume(1000, 1.0)
                idle = 0 if batch else idle + 1
                for msg in batch:
                    raw_key, partition, offset = msg.key(), msg.partition(), msg.offset()
                    if msg.error() or raw_key is None or partition is None or offset is None:
                        continue
                    key = raw_key.decode()
                    seen[key] = seen.get(key, 0) + 1
                    positions.add((partition, offset))
            consumer.close()
            missing = sorted(set(acked) - set(seen), key=int)
            _say(
                f"consumer read {sum(seen.values())} records ({len(seen)} distinct keys) from {len(positions)} offsets"
            )
            _say(
                f"acknowledged but missing: {len(missing)}"
                + (f" e.g. {missing[:5]}" if missing else "")
            )
            duplicates = sorted((k for k, c in seen.items() if c > 1), key=int)
            _say(
                f"duplicates: {len(duplicates)}" + (f" e.g. {duplicates[:5]}" if duplicates else "")
            )
            ok = not missing and not duplicates and not failed
            _say(
                "VERDICT: "
                + ("every acknowledged event survived the SIGKILL" if ok else "DATA LOSS")
            )
            return ok
        finally:
            broker.stop(signal.SIGTERM)
