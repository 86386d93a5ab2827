"""Fuzz a fresh single broker: frames/s, crashes, lost writes of the well-behaved client, RSS.

    .venv/bin/python benchmarks/fuzz_broker.py --frames 1000000 --time-limit-s 3000

Starts its own broker on loopback (a temporary data dir), runs ``floodmark.chaos.fuzz`` against
it and prints the report; the broker is stopped at the end. Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from floodmark.chaos.fuzz import FuzzConfig, run_fuzz


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--frames", type=int, default=100_000)
    p.add_argument("--time-limit-s", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--connections", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "broker.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "broker", "--data-dir",
                                 str(Path(tmp) / "data"), "--listen", "127.0.0.1:0"],
                                stdout=subprocess.PIPE, stderr=log)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            port = int(line.rsplit(":", 1)[1].split()[0])
            started = time.monotonic()
            report = run_fuzz(FuzzConfig(f"127.0.0.1:{port}", frames=args.frames,
                                         time_limit_s=args.time_limit_s, seed=args.seed,
                                         broker_pid=proc.pid, connections=args.connections))
            data = report.as_json()
            data["wall_s"] = round(time.monotonic() - started, 1)
            data["handler_failures"] = (Path(tmp) / "broker.log").read_text(
                errors="replace").count("handler failed")
            print(json.dumps(data, indent=1))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
