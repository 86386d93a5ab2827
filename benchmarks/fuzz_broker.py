"""Fuzz one fresh broker in chunks: frames/s, crashes, lost writes of the well-behaved client, RSS.

    .venv/bin/python benchmarks/fuzz_broker.py --frames 1000000 --progress fuzz.jsonl

Starts its own broker on loopback (a temporary data dir) and runs ``floodmark.chaos.fuzz``
against it in chunks of ``--chunk-frames`` frames (chunk i uses seed ``--seed`` + i), so a long
run is bounded (``--time-limit-s`` over all chunks, and each chunk by the time left) and shows
the broker's memory as it goes. After each chunk one JSON line is printed and appended to
``--progress``: frames so far, the chunk's figures, the broker's RSS, whether it is alive,
handler failures in its log, and its partition directories (valid CreateTopics frames create
topics, so the broker's state, and its memory, grows with them). ``--resume`` continues a stopped run from the last line of
``--progress`` (the frame count and the next chunk's seed; the broker is a new one, which the
line says). A dead broker ends the run. Prints figures, never pass/fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from floodmark.chaos.fuzz import FuzzConfig, pid_alive, rss_kb, run_fuzz


def _last_line(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--frames", type=int, default=100_000)
    p.add_argument("--chunk-frames", type=int, default=50_000)
    p.add_argument("--time-limit-s", type=float, default=600.0,
                   help="for the whole run, over all chunks")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--progress", default=None, metavar="FILE",
                   help="append one JSON line per chunk here")
    p.add_argument("--resume", action="store_true",
                   help="continue from the last line of --progress")
    args = p.parse_args()
    progress = Path(args.progress) if args.progress else None
    done, chunk, crashes, lost = 0, 0, 0, 0
    if args.resume:
        last = _last_line(progress) if progress else None
        if last is None:
            sys.exit("error: --resume needs a --progress file with at least one line")
        done, chunk = last["frames_total"], last["chunk"] + 1
        crashes, lost = last["crashes_total"], last["lost_total"]
    with tempfile.TemporaryDirectory(prefix="fm-fuzz-") as tmp, \
            open(Path(tmp) / "broker.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "broker", "--data-dir",
                                 str(Path(tmp) / "data"), "--listen", "127.0.0.1:0"],
                                stdout=subprocess.PIPE, stderr=log)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            port = int(line.rsplit(":", 1)[1].split()[0])
            started = time.monotonic()
            first = True
            while done < args.frames:
                left_s = args.time_limit_s - (time.monotonic() - started)
                if left_s <= 0:
                    break
                report = run_fuzz(FuzzConfig(
                    f"127.0.0.1:{port}", frames=min(args.chunk_frames, args.frames - done),
                    time_limit_s=left_s, seed=args.seed + chunk, broker_pid=proc.pid,
                    connections=args.connections))
                data = report.as_json()
                done += report.frames
                alive = pid_alive(proc.pid)
                failures = (Path(tmp) / "broker.log").read_text(
                    errors="replace").count("handler failed")
                crashes += (0 if alive else 1)
                lost += data["lost_count"]
                row = {"chunk": chunk, "seed": args.seed + chunk, "frames_total": done,
                       "wall_s": round(time.monotonic() - started, 1),
                       "new_broker": first and args.resume, "broker_alive": alive,
                       "rss_kb": rss_kb(proc.pid), "handler_failures": failures,
                       # valid CreateTopics frames create topics: state that grows legitimately
                       "partition_dirs": sum(1 for _ in (Path(tmp) / "data").iterdir()),
                       "crashes_total": crashes, "lost_total": lost,
                       "chunk_report": {k: data[k] for k in (
                           "frames", "frames_per_s", "answered", "closed", "acknowledged",
                           "lost_count", "client_errors", "rss_before_kb", "rss_after_kb",
                           "rss_samples_kb")}}
                print(json.dumps(row), flush=True)
                if progress is not None:
                    with progress.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                first = False
                chunk += 1
                if not alive:
                    tail = (Path(tmp) / "broker.log").read_text(errors="replace")[-3000:]
                    print(f"the broker died; its log ends:\n{tail}", file=sys.stderr)
                    break
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
