"""Controller restart time with a long metadata log, before and after snapshots (KIP-630).

Builds two controller data directories from the same stream of decisions (``--records``
metadata records: 3 brokers, 1,000 topics of 3 partitions (RF 3), then churn: brokers
restarting again and again — fenced, leaders moved, ISRs shrunk and expanded — and config
changes), through the controller's own logic and persistence path:

* ``without``: snapshots off (``--metadata-log-max-record-bytes-between-snapshots 0``): a
  restart recovers and replays the whole log;
* ``with``: a snapshot every ``--snapshot-bytes`` of committed records, the log cut at the older
  retained snapshot: a restart loads the newest snapshot and replays only the log after it.

Then restarts a real controller process on each, alternately, ``--restarts`` times, and reports
the time from process start to its "listening" line (the metadata is loaded before it listens)
and checks that both answer ``status`` with every topic.

    .venv/bin/python benchmarks/controller_snapshot_restart.py [--records 100000] [--restarts 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from floodmark.controller import rpc
from floodmark.controller.logic import ControllerConfig
from floodmark.controller.metadata_log import MetadataLogConfig
from floodmark.controller.server import ControllerServer

SEGMENT_BYTES = 1 << 20
TOPICS = 1000
PARTITIONS = 3


def build(path: Path, records: int, snapshot_bytes: int) -> tuple[int, int]:
    """Returns (metadata records written, topics). The mix a long-lived cluster writes: topics
    created once, then churn that supersedes records — brokers restarting (a new incarnation
    fences the old one: leaders move, ISRs shrink, then expand), config changes."""
    server = ControllerServer(str(path), ControllerConfig(), 0, None,
                              MetadataLogConfig(SEGMENT_BYTES, snapshot_bytes))
    epochs = {}
    for b in range(1, 4):
        epochs[b] = server.call("register", {"broker_id": b, "host": "127.0.0.1",
                                             "port": 9000 + b, "incarnation": f"bench-{b}"}
                                )["result"]["broker_epoch"]
        server.call("heartbeat", {"broker_id": b, "broker_epoch": epochs[b]})
    logic = server.logic
    assert logic is not None
    for t in range(TOPICS):
        logic.create_topic(f"topic-{t:05d}", PARTITIONS, 3, {"retention.ms": "3600000"})
        if t % 100 == 99:
            server._persist()  # one batch per 100 topics (a batch is at most 1 MiB)
    server._persist()
    round_ = 0
    while server.image.next_offset < records:
        round_ += 1
        b = 1 + round_ % 3
        # broker b restarts: a new incarnation (the old one is fenced: leaders and ISRs move)
        answer = server.call("register", {"broker_id": b, "host": "127.0.0.1",
                                          "port": 9000 + b, "incarnation": f"r{round_}"})
        assert "result" in answer, answer
        epochs[b] = answer["result"]["broker_epoch"]
        server.call("heartbeat", {"broker_id": b, "broker_epoch": epochs[b]})
        for t in range(0, TOPICS, 7):  # its ISR memberships come back (AlterPartition)
            for p in range(PARTITIONS):
                reg = server.image.partition(f"topic-{t:05d}", p)
                if reg is None or b in reg.isr or reg.leader < 0:
                    continue
                leader = reg.leader
                server.call("alter_partition", {
                    "broker_id": leader, "broker_epoch": epochs[leader],
                    "topics": [{"topic_name": f"topic-{t:05d}", "partitions": [{
                        "partition_index": p, "leader_epoch": reg.leader_epoch,
                        "partition_epoch": reg.partition_epoch, "new_isr": [*reg.isr, b],
                        "new_isr_broker_epochs": [epochs[r] for r in [*reg.isr, b]]}]}]})
        logic.alter_topic_configs(f"topic-{round_ % TOPICS:05d}",
                                  {"retention.ms": str(3600000 + round_)})
        server._persist()  # the server's own path: append, fsync, maybe snapshot
    end = server.image.next_offset
    server.mlog.close()
    return end, TOPICS


def restart(path: Path, snapshot_bytes: int, topics: int) -> float:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "floodmark.controller", "--data-dir", str(path),
         "--metadata-log-segment-bytes", str(SEGMENT_BYTES),
         "--metadata-log-max-record-bytes-between-snapshots", str(snapshot_bytes),
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        elapsed = time.monotonic() - started
        assert "listening on" in line, line
        address = line.strip().rsplit(" ", 1)[-1]
        status = rpc.blocking_call(address, "status", {}, timeout_s=60)["result"]
        assert len(status["topics"]) == topics, (len(status["topics"]), topics)
        return elapsed
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--restarts", type=int, default=3)
    p.add_argument("--snapshot-bytes", type=int, default=1 << 20,
                   help="metadata.log.max.record.bytes.between.snapshots for the 'with' run")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="floodmark-snap11-bench-"))
    try:
        without, with_ = root / "without", root / "with"
        t0 = time.monotonic()
        end_a, topics = build(without, args.records, 0)
        end_b, topics_b = build(with_, args.records, args.snapshot_bytes)
        assert (end_a, topics) == (end_b, topics_b)
        print(f"built two controllers with {end_a} metadata records ({topics} topics) in "
              f"{time.monotonic() - t0:.1f} s")
        for name, path in (("without", without), ("with", with_)):
            mdir = path / "__cluster_metadata-0"
            logs = sum(f.stat().st_size for f in mdir.glob("*.log"))
            snaps = sorted(mdir.glob("*.checkpoint"))
            print(f"  {name} snapshots: metadata log {logs / 1e6:.1f} MB in "
                  f"{len(list(mdir.glob('*.log')))} segment(s), {len(snaps)} snapshot(s)"
                  + (f", newest {snaps[-1].name} ({snaps[-1].stat().st_size / 1e6:.1f} MB)"
                     if snaps else ""))
        times: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(args.restarts):
            times["without"].append(restart(without, 0, topics))
            times["with"].append(restart(with_, args.snapshot_bytes, topics))
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            print(f"restart {k} snapshots: median {med[k]:.2f} s "
                  f"(runs: {', '.join(f'{t:.2f}' for t in v)})")
        print(f"ratio without/with: {med['without'] / med['with']:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
