"""TLS vs plaintext: produce and consume throughput and broker CPU per GB, 1 KiB records, side by
side in one run (issue 21's performance goal: TLS at least 0.7x plaintext).

One broker with two listeners, ``PLAINTEXT`` and ``SSL`` (a throwaway CA from
``floodmark.security.certs``); each round produces ``--mb`` MB into a fresh topic over one
listener with confluent-kafka (librdkafka: acks=all, lz4 off, batches as a throughput
producer sends them), then consumes it back from the beginning; the variants alternate
(``--rounds``), and the broker's utime+stime (procfs) is sampled around each phase, as is this
process's (the client: librdkafka's threads encrypt and decrypt here). Loopback on a shared
machine: compare the ratio, not the absolute numbers; on two cores the client's TLS work
competes with the broker's for the same CPUs. TLS loses sendfile (the kernel cannot encrypt),
as Kafka does.

    .venv/bin/python benchmarks/tls.py [--mb 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.security import certs

RECORD = 1024
MB = 1_000_000


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_broker(work: Path, keystore: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    cmd = [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(work / "data"),
           "--listen", "127.0.0.1:0",
           "--set", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
           "--set", f"ssl.keystore.location={keystore}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=open(work / "broker.log", "ab"))  # noqa: SIM115
    assert proc.stdout is not None
    ports: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while len(ports) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            break
        m = re.search(r"listener (\S+) \(\S+\) at (\S+)", line)
        if m:
            ports[m.group(1)] = m.group(2)
    if len(ports) < 2:
        proc.kill()
        raise SystemExit(f"broker did not start; see {work / 'broker.log'}")
    return proc, ports


def client_conf(variant: str, bootstrap: str, ca: Path) -> dict[str, str]:
    conf = {"bootstrap.servers": bootstrap}
    if variant == "SSL":
        conf.update({"security.protocol": "ssl", "ssl.ca.location": str(ca)})
    return conf


def produce(conf: dict[str, str], topic: str, count: int) -> None:
    p = Producer({**conf, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576})
    value = b"x" * RECORD
    for _ in range(count):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120) != 0:
        raise SystemExit("produce did not finish")


def consume(conf: dict[str, str], topic: str, count: int) -> None:
    c = Consumer({**conf, "group.id": "bench-" + topic, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 52_428_800})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for msg in c.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    c.close()
    if got < count:
        raise SystemExit(f"consumed {got} of {count}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="MB produced and consumed per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    count = args.mb * MB // RECORD
    with tempfile.TemporaryDirectory(prefix="floodmark-bench-tls-") as tmp:
        work = Path(tmp)
        ca, ca_path = certs.load_or_make_ca(work / "tls")
        files = certs.issue_files(work / "tls", "broker", ca, ("127.0.0.1", "localhost"))
        proc, listeners = start_broker(work, files.keystore)
        results: dict[str, dict[str, list[float]]] = {
            v: {"produce": [], "consume": [], "produce_cpu": [], "consume_cpu": [],
                "produce_client_cpu": [], "consume_client_cpu": []}
            for v in ("PLAINTEXT", "SSL")}
        try:
            admin = AdminClient({"bootstrap.servers": listeners["PLAINTEXT"]})
            for _ in range(args.rounds):
                for variant in ("PLAINTEXT", "SSL"):
                    topic = f"bench-{variant.lower()}-{uuid.uuid4().hex[:6]}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    conf = client_conf(variant, listeners[variant], ca_path)
                    for phase, run in (("produce", produce), ("consume", consume)):
                        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
                        own0 = time.process_time()
                        run(conf, topic, count)
                        elapsed = time.perf_counter() - t0
                        cpu = cpu_seconds(proc.pid) - cpu0
                        own = time.process_time() - own0
                        gb = count * RECORD / 1e9
                        results[variant][phase].append(count * RECORD / MB / elapsed)
                        results[variant][f"{phase}_cpu"].append(cpu / gb)
                        results[variant][f"{phase}_client_cpu"].append(own / gb)
                        print(f"{variant:9s} {phase:7s} {count * RECORD / MB / elapsed:8.1f} "
                              f"MB/s  broker CPU {cpu / gb:6.2f} s/GB  client CPU "
                              f"{own / gb:6.2f} s/GB", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"\n{args.mb} MB of 1 KiB records per round, {args.rounds} rounds, median:")
    for phase in ("produce", "consume"):
        plain = statistics.median(results["PLAINTEXT"][phase])
        tls = statistics.median(results["SSL"][phase])
        cpu_plain = statistics.median(results["PLAINTEXT"][f"{phase}_cpu"])
        cpu_tls = statistics.median(results["SSL"][f"{phase}_cpu"])
        client_plain = statistics.median(results["PLAINTEXT"][f"{phase}_client_cpu"])
        client_tls = statistics.median(results["SSL"][f"{phase}_client_cpu"])
        print(f"  {phase:7s} PLAINTEXT {plain:7.1f} MB/s (broker {cpu_plain:5.2f}, client "
              f"{client_plain:5.2f} CPU s/GB)  SSL {tls:7.1f} MB/s (broker {cpu_tls:5.2f}, "
              f"client {client_tls:5.2f} CPU s/GB)  TLS/plaintext {tls / plain:.2f}x, broker "
              f"CPU {cpu_tls / cpu_plain:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
