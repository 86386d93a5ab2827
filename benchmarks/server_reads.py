"""The broker's read path alone, PLAINTEXT and SSL: listener CPU seconds per GB of request frames
(issue 21: where TLS produce loses to plaintext, without storage in the way).

One listener started as the broker starts its own (``broker.server.start_listener``, uvloop, an
SSL listener's ``ServerTls`` with a throwaway CA's certificate) whose dispatcher only counts
frames; a client process sends ``--mb`` MB of frames of one size as fast as it can (1,000,000
bytes: a produce request as librdkafka fills one with ``batch.size`` 1 MB; 1,024 bytes: small
requests back to back), over one connection. The listener process's CPU (utime+stime) from the
connection's start to its last frame, per GB. Variants alternate within each round; the medians
and the SSL/PLAINTEXT ratios are printed at the end. To compare two source trees run it twice
with ``PYTHONPATH`` at each; on a shared machine compare ratios measured in the same run.

    .venv/bin/python benchmarks/server_reads.py [--mb 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

from floodmark.broker.server import Connection, start_listener
from floodmark.security import certs
from floodmark.security.tls import ServerTls, ssl_settings

MB = 1_000_000
SIZES = (1_000_000, 1024)
CHUNK_BYTES = 8 * MB


def client(port: int, ca: str, size: int, mb: int) -> None:
    """The sending side (its own process): ``mb`` MB of ``size``-byte frames, then wait for the
    listener to close the connection."""
    frame = (size - 4).to_bytes(4, "big") + b"\x00\x00\x00\x00\x00\x00\x00\x01" + bytes(size - 12)
    chunk = frame * max(1, CHUNK_BYTES // size)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ca:
        ctx = ssl.create_default_context(cafile=ca)
        sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    total = mb * MB // size * size
    sent = 0
    view = memoryview(chunk)
    while sent < total:
        n = min(len(chunk), total - sent)
        sock.sendall(view[:n])
        sent += n
    sock.settimeout(120)
    while sock.recv(65536):
        pass
    sock.close()


async def measure(tls: ServerTls | None, ca: str, size: int, mb: int) -> tuple[float, float]:
    """(MB/s, listener CPU s/GB) of one connection's ``mb`` MB of ``size``-byte frames."""
    loop = asyncio.get_running_loop()
    total = mb * MB // size * size
    done: asyncio.Future[None] = loop.create_future()
    started: list[tuple[float, float]] = []
    got = 0

    def dispatch(frame: memoryview | bytes, conn: Connection) -> None:
        nonlocal got
        got += 4 + len(frame)
        if got >= total and not done.done():
            done.set_result(None)
            conn.abort()

    def on_open(_conn: Connection) -> None:
        started.append((time.perf_counter(), time.process_time()))

    server = await start_listener("127.0.0.1", 0, dispatch, 2 * MB, on_open, lambda _c: None,
                                  tls=tls)
    port = server.sockets[0].getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", str(port), ca, str(size), str(mb))
    try:
        await asyncio.wait_for(done, 300)
        elapsed = time.perf_counter() - started[0][0]
        cpu = time.process_time() - started[0][1]
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        server.close()
    return total / MB / elapsed, cpu / (total / 1e9)


async def run(args: argparse.Namespace, tls: ServerTls, ca: str) -> None:
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for size in SIZES:
            for variant in ("PLAINTEXT", "SSL"):
                rate, cpu = await measure(tls if variant == "SSL" else None,
                                          ca if variant == "SSL" else "", size, args.mb)
                results.setdefault((variant, size), []).append((rate, cpu))
                print(f"{variant:9s} {size:9,d} B frames {rate:8.1f} MB/s  listener CPU "
                      f"{cpu:5.2f} s/GB", flush=True)
    print(f"\n{args.mb} MB per run, {args.rounds} rounds, median:")
    for size in SIZES:
        plain = statistics.median(c for _, c in results[("PLAINTEXT", size)])
        tls_cpu = statistics.median(c for _, c in results[("SSL", size)])
        print(f"  {size:9,d} B frames  PLAINTEXT {plain:5.2f} CPU s/GB  SSL {tls_cpu:5.2f} "
              f"CPU s/GB  SSL/PLAINTEXT {tls_cpu / plain:.2f}x")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        port, ca, size, mb = sys.argv[2:6]
        client(int(port), ca, int(size), int(mb))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=300, help="MB sent per run")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import uvloop

    with tempfile.TemporaryDirectory(prefix="floodmark-bench-reads-") as tmp:
        authority, ca_path = certs.load_or_make_ca(Path(tmp))
        files = certs.issue_files(Path(tmp), "broker", authority, ("127.0.0.1", "localhost"))
        settings = {"ssl.keystore.location": str(files.keystore)}
        tls = ServerTls(ssl_settings(settings.get))
        uvloop.run(run(args, tls, str(ca_path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
