"""What ``floodmark ui`` costs the brokers: requests each broker receives per second while one
browser watches one partition, by API (the brokers' own ``kafka_network_requestmetrics_requests``
counters, read before and after).

A fresh 3-broker local cluster with ``--topics`` topics of 3 partitions (RF 3), a few records in
the first; ``floodmark ui --data-dir`` at its default interval; one server-sent-events stream
(``/api/events?topic=...&partition=0``, what the page opens) held for ``--seconds``. The first
half has records flowing into the watched partition (one a second); the second half is quiet
(the poller backs off).

    .venv/bin/python benchmarks/ui_polling.py [--seconds 40] [--topics 5]

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from floodmark.cluster import LocalCluster

LINE = re.compile(r'^kafka_network_requestmetrics_requests_total\{request="([^"]+)"\} (\S+)$')


def counts(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def snapshot(metrics: dict[int, str]) -> dict[int, dict[str, float]]:
    return {b: counts(u) for b, u in metrics.items()}


def diff(before: dict[int, dict[str, float]], after: dict[int, dict[str, float]],
         seconds: float) -> dict[int, dict[str, float]]:
    return {b: {api: (after[b].get(api, 0) - before[b].get(api, 0)) / seconds
                for api in after[b] if after[b].get(api, 0) - before[b].get(api, 0) > 0}
            for b in after}


def show(title: str, rates: dict[int, dict[str, float]]) -> None:
    print(title)
    for b, by_api in sorted(rates.items()):
        total = sum(by_api.values())
        top = ", ".join(f"{api} {r:.2f}" for api, r in sorted(by_api.items(), key=lambda x: -x[1]))
        print(f"  broker {b}: {total:.2f} requests/s ({top})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--topics", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp) / "c", 3).start()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            for fut in admin.create_topics([NewTopic(f"t{i}", 3, 3)
                                            for i in range(args.topics)]).values():
                fut.result(30)
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
            for i in range(10):
                producer.produce("t0", value=b"v%d" % i, partition=0)
            producer.flush(30)
            metrics = {int(n["id"]): str(n["metrics"]) for n in cluster.status()["nodes"]
                       if "broker" in str(n["role"]) and n.get("metrics")}
            ui = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "ui", "--data-dir",
                                   str(cluster.data_dir), "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, text=True)
            try:
                assert ui.stdout is not None
                url = ui.stdout.readline().split()[-1]
                stop = threading.Event()

                def watch() -> None:
                    with urllib.request.urlopen(f"{url}api/events?topic=t0&partition=0",
                                                timeout=args.seconds * 2) as resp:
                        while not stop.is_set() and resp.readline():
                            pass

                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                time.sleep(2)
                half = args.seconds / 2
                before = snapshot(metrics)
                t0 = time.monotonic()
                while time.monotonic() - t0 < half:
                    producer.produce("t0", value=b"x", partition=0)
                    producer.flush(10)
                    time.sleep(1)
                mid = snapshot(metrics)
                busy_s = time.monotonic() - t0
                time.sleep(half)
                after = snapshot(metrics)
                quiet_s = time.monotonic() - t0 - busy_s
                stop.set()
            finally:
                ui.terminate()
                ui.wait(10)
            show(f"one watcher, records flowing ({busy_s:.0f} s):", diff(before, mid, busy_s))
            show(f"one watcher, quiet ({quiet_s:.0f} s):", diff(mid, after, quiet_s))
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
