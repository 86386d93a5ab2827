"""Broker cost of one consumer Fetch, per Fetch version and fetch-session mode, side by side.

One broker per source tree (``--src``, default: this checkout; give two to compare a baseline
with the working tree in one run), 8 partitions of 100-byte records. A raw client sends the
same Fetch over and over and reads each answer's bytes without decoding them, so the figures are
the broker's: requests per second and broker CPU microseconds per request. ``--at head``
reads 4 KiB per partition from offset 0 (a consumer catching up), ``--at tail`` asks at the log
end with ``max_wait`` 0 (a caught-up consumer: pure per-request cost). Variants:

* ``v12``  topics by name, no session (session epoch -1): what kafka-python and aiokafka send;
* ``v16``  topics by id, no session: what librdkafka 2.16 sends;
* ``v12-session``  an incremental fetch session (KIP-227) where nothing changed between requests:
  the broker still reads every partition but answers only the changed ones (none).

    .venv/bin/python benchmarks/fetch_versions.py [--src DIR ...] [--seconds 3] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 8
TOPIC = "fetch-bench"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_broker(src: Path, data_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "floodmark.cli", "broker", "--data-dir", str(data_dir),
         "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
        stderr=open(data_dir.with_suffix(".log"), "wb"), env=env)  # noqa: SIM115
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.search(r"listening on \S+:(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"broker from {src} did not start: {line!r}")
    return proc, int(m.group(1))


def fill(port: int, records: int) -> uuid.UUID:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from floodmark.client import KafkaConnection

    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * 100
    for i in range(records):
        p.produce(TOPIC, value=value, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(60)
    with KafkaConnection(bootstrap) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": TOPIC, "topic_id": None}]})
        ends = conn.request(2, 4, {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": i, "timestamp": -1} for i in range(PARTITIONS)]}]})
        for part in ends.topics[0].partitions:
            LOG_END[int(part.partition_index)] = int(part.offset)
        return uuid.UUID(str(meta.topics[0].topic_id))


OFFSETS: list[int] = [0] * PARTITIONS
LOG_END: list[int] = [0] * PARTITIONS


def fetch_body(topic_id: uuid.UUID, session_id: int = 0, epoch: int = -1,
               partitions: bool = True) -> dict[str, object]:
    parts = [{"partition": i, "fetch_offset": OFFSETS[i], "partition_max_bytes": 4096,
              "current_leader_epoch": -1} for i in range(PARTITIONS)]
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 50 * 1024 * 1024,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "topic_id": topic_id,
                        "partitions": parts if partitions else []}],
            "forgotten_topics_data": [], "rack_id": ""}


def read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        head += chunk
    (size,) = struct.unpack(">i", head)
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("broker closed the connection")
        got += n
    return bytes(buf)


def run_variant(port: int, pid: int, variant: str, topic_id: uuid.UUID,
                seconds: float) -> tuple[float, float, int]:
    from floodmark.client.connection import decode_response, encode_request

    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    version = 16 if variant == "v16" else 12
    session_id, epoch = 0, -1
    if variant == "v12-session":
        # A full fetch creates the session, the next one (epoch 1) moves every partition's
        # fetch offset into it; from then on nothing changes: later requests carry no partition.
        sock.sendall(encode_request(1, 12, 1, fetch_body(topic_id, 0, 0)))
        first = decode_response(read_frame(sock), 1, 12, 1)
        session_id = int(first.session_id)
        if session_id == 0:
            return 0.0, 0.0, 0  # the broker has no fetch sessions
        sock.sendall(encode_request(1, 12, 2, fetch_body(topic_id, session_id, 1, False)))
        read_frame(sock)
        epoch = 2
    # Session requests differ in their epoch: encoded before the clock starts.
    session_frames = ([encode_request(1, version, i, fetch_body(topic_id, session_id, epoch + i,
                                                                partitions=False))
                       for i in range(int(seconds * 20_000))]
                      if variant == "v12-session" else [])
    frames = 0
    size = 0
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    fixed = bytearray(encode_request(1, version, 0, fetch_body(topic_id)))
    while time.perf_counter() - t0 < seconds:
        if variant == "v12-session":
            if frames >= len(session_frames):
                break
            frame = session_frames[frames]
        else:
            struct.pack_into(">i", fixed, 8, frames)  # the same request, a new correlation id
            frame = bytes(fixed)
        sock.sendall(frame)
        size = len(read_frame(sock))
        frames += 1
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    sock.close()
    return frames / elapsed, cpu / max(frames, 1) * 1e6, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--src", action="append", default=None,
                    help="source tree (its src/ directory); repeat to compare")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=80_000)
    ap.add_argument("--at", choices=["head", "tail"], default="tail")
    args = ap.parse_args()
    sources = [Path(s).resolve() for s in (args.src or [str(REPO / "src")])]
    variants = ["v12", "v16", "v12-session"]
    results: dict[tuple[int, str], list[tuple[float, float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="floodmark-fetch-bench-") as tmp:
        brokers = []
        for i, src in enumerate(sources):
            proc, port = start_broker(src, Path(tmp) / f"data{i}")
            brokers.append((proc, port, fill(port, args.records)))
        if args.at == "tail":
            OFFSETS[:] = LOG_END  # the same record count everywhere: the same log ends
        try:
            for rep in range(args.reps):
                for i, (proc, port, tid) in enumerate(brokers):
                    for variant in variants:
                        try:
                            r = run_variant(port, proc.pid, variant, tid, args.seconds)
                        except (ConnectionError, OSError):
                            r = (0.0, 0.0, 0)  # that tree does not serve this version
                        results.setdefault((i, variant), []).append(r)
                        print(f"[rep {rep}] {sources[i]}: {variant:12s} {r[0]:8.0f} req/s "
                              f"{r[1]:7.1f} us CPU/req  answer {r[2]} B", flush=True)
        finally:
            for proc, _, _ in brokers:
                proc.terminate()
                proc.wait(20)
    print("\nmedian over reps: requests/s, broker CPU us per request")
    for i, src in enumerate(sources):
        for variant in variants:
            runs = sorted(results[(i, variant)])
            rate, cpu, size = runs[len(runs) // 2]
            print(f"  {src!s:50s} {variant:12s} {rate:8.0f} req/s {cpu:7.1f} us/req "
                  f"({size} B answers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
