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

``--broker kafka`` runs the same rounds against the real Apache Kafka (one combined-mode KRaft
node of ``tests/reference/kafka_node``, jars from Maven Central, its SSL listener with the same
PEM key store: ``ssl.keystore.type=PEM``); ``--broker both`` alternates the two brokers inside
each round, so Kafka's TLS/plaintext ratio on this machine is measured beside floodmark's, in
the same run.

    .venv/bin/python benchmarks/tls.py [--mb 200] [--rounds 3] [--broker floodmark|kafka|both]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reference.kafka_node import (
    KafkaCluster,
    KafkaNode,
    missing_reason,
    random_cluster_id,
)

from floodmark.ports import free_port
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


def start_kafka(work: Path, keystore: Path) -> tuple[KafkaCluster, int, dict[str, str]]:
    """One combined-mode Kafka node with a PLAINTEXT and an SSL listener; its pid (the JVM) and
    the two listeners' addresses."""
    node = KafkaNode(1, free_port(), free_port(), work / "kafka" / "node-1")
    ssl_port = free_port()
    cluster = KafkaCluster(work / "kafka", 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},"
                     f"SSL://127.0.0.1:{ssl_port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.broker_port},"
                                f"SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }, nodes=[node], cluster_id=random_cluster_id()).start()
    assert node.pid is not None
    return cluster, node.pid, {"PLAINTEXT": node.address, "SSL": f"127.0.0.1:{ssl_port}"}


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
    ap.add_argument("--warmup-mb", type=int, default=50,
                    help="MB produced and consumed over each listener before the rounds, not "
                         "counted (the JVM's JIT warms up; floodmark's the same, for fairness)")
    ap.add_argument("--broker", choices=("floodmark", "kafka", "both"), default="floodmark",
                    help="kafka: the real Apache Kafka; both: the two alternating in each round")
    args = ap.parse_args()
    names = ["floodmark", "kafka"] if args.broker == "both" else [args.broker]
    if "kafka" in names and (reason := missing_reason()):
        raise SystemExit(f"Apache Kafka cannot run here: {reason}")
    count = args.mb * MB // RECORD
    with tempfile.TemporaryDirectory(prefix="floodmark-bench-tls-") as tmp:
        work = Path(tmp)
        ca, ca_path = certs.load_or_make_ca(work / "tls")
        files = certs.issue_files(work / "tls", "broker", ca, ("127.0.0.1", "localhost"))
        brokers: dict[str, tuple[int, dict[str, str]]] = {}
        proc: subprocess.Popen[bytes] | None = None
        kafka: KafkaCluster | None = None
        variants = [(b, v) for b in names for v in ("PLAINTEXT", "SSL")]
        results: dict[tuple[str, str], dict[str, list[float]]] = {
            bv: {"produce": [], "consume": [], "produce_cpu": [], "consume_cpu": [],
                 "produce_client_cpu": [], "consume_client_cpu": []}
            for bv in variants}
        try:
            if "floodmark" in names:
                proc, listeners = start_broker(work, files.keystore)
                brokers["floodmark"] = (proc.pid, listeners)
            if "kafka" in names:
                kafka, pid, listeners = start_kafka(work, files.keystore)
                brokers["kafka"] = (pid, listeners)
            for broker, variant in variants if args.warmup_mb > 0 else []:
                pid, listeners = brokers[broker]
                admin = AdminClient({"bootstrap.servers": listeners["PLAINTEXT"]})
                topic = f"warmup-{variant.lower()}-{uuid.uuid4().hex[:6]}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                warm = args.warmup_mb * MB // RECORD
                conf = client_conf(variant, listeners[variant], ca_path)
                produce(conf, topic, warm)
                consume(conf, topic, warm)
                print(f"{broker:9s} {variant:9s} warmed up ({args.warmup_mb} MB)", flush=True)
            for _ in range(args.rounds):
                for broker, variant in variants:
                    pid, listeners = brokers[broker]
                    admin = AdminClient({"bootstrap.servers": listeners["PLAINTEXT"]})
                    topic = f"bench-{variant.lower()}-{uuid.uuid4().hex[:6]}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    conf = client_conf(variant, listeners[variant], ca_path)
                    for phase, run in (("produce", produce), ("consume", consume)):
                        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
                        own0 = time.process_time()
                        run(conf, topic, count)
                        elapsed = time.perf_counter() - t0
                        cpu = cpu_seconds(pid) - cpu0
                        own = time.process_time() - own0
                        gb = count * RECORD / 1e9
                        r = results[(broker, variant)]
                        r[phase].append(count * RECORD / MB / elapsed)
                        r[f"{phase}_cpu"].append(cpu / gb)
                        r[f"{phase}_client_cpu"].append(own / gb)
                        print(f"{broker:9s} {variant:9s} {phase:7s} "
                              f"{count * RECORD / MB / elapsed:8.1f} MB/s  broker CPU "
                              f"{cpu / gb:6.2f} s/GB  client CPU {own / gb:6.2f} s/GB  "
                              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
            if kafka is not None:
                kafka.stop()
    print(f"\n{args.mb} MB of 1 KiB records per round, {args.rounds} rounds, median:")
    for broker in names:
        for phase in ("produce", "consume"):
            plain_r, tls_r = results[(broker, "PLAINTEXT")], results[(broker, "SSL")]
            plain = statistics.median(plain_r[phase])
            tls = statistics.median(tls_r[phase])
            cpu_plain = statistics.median(plain_r[f"{phase}_cpu"])
            cpu_tls = statistics.median(tls_r[f"{phase}_cpu"])
            client_plain = statistics.median(plain_r[f"{phase}_client_cpu"])
            client_tls = statistics.median(tls_r[f"{phase}_client_cpu"])
            print(f"  {broker:9s} {phase:7s} PLAINTEXT {plain:7.1f} MB/s (broker "
                  f"{cpu_plain:5.2f}, client {client_plain:5.2f} CPU s/GB)  SSL {tls:7.1f} MB/s "
                  f"(broker {cpu_tls:5.2f}, client {client_tls:5.2f} CPU s/GB)  TLS/plaintext "
                  f"{tls / plain:.2f}x, broker CPU {cpu_tls / cpu_plain:.2f}x")
    if len(names) == 2:
        for phase in ("produce", "consume"):
            ratios = {b: [t / p for t, p in zip(results[(b, "SSL")][phase],
                                                 results[(b, "PLAINTEXT")][phase], strict=True)]
                      for b in names}
            print(f"  TLS/plaintext {phase}, each round: floodmark "
                  f"{', '.join(f'{x:.2f}' for x in ratios['floodmark'])}; Apache Kafka "
                  f"{', '.join(f'{x:.2f}' for x in ratios['kafka'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
