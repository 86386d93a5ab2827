"""One idle replica Fetch round of N partitions, with and without a KIP-227 fetch session: the
CPU of the wire and the leader's answer, in one process, side by side.

A leader of N partitions (real ``PartitionState``s over real logs in a temporary directory,
follower 2 in every ISR, nothing to read) and the follower's side of the wire; each round:

* ``full``: what a fetcher sends without a session (every partition named): the follower packs
  the request (``encode_replica_fetch_request``), the leader decodes it, answers every partition
  (``ReplicaManager.answer_fetch``, max wait 0 so it answers at once), the follower decodes the
  answer;
* ``session``: the same in an established incremental session (``FetchSessionHandler`` on the
  follower, the broker's ``FetchSessionCache`` on the leader): nothing changed, so the request
  names nothing and the answer carries nothing; the leader still asks the core about every
  partition of the session (the follower's fetch is recorded for each).

Rounds alternate (full, session, full, ...) so a machine whose load comes and goes weighs on
both alike; CPU is ``time.process_time`` (this process only).

``--leader-only`` runs only the leader's answer to the same session Fetch ``--rounds`` times
(what an idle round costs the leader, without the follower's side). Its CPU on a loaded machine
varies run to run; the instructions do not: under ``valgrind --tool=callgrind`` the difference
of two runs (``--rounds 2`` and ``--rounds 12``) over 10 x N is the instructions of one
partition's idle round on the leader.

    PYTHONPATH=src .venv/bin/python benchmarks/replica_fetch_session.py --partitions 100,300,1000
    PYTHONPATH=src valgrind --tool=callgrind .venv/bin/python \
        benchmarks/replica_fetch_session.py --partitions 300 --leader-only --rounds 12

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from floodmark.broker.fetch_session_handler import FetchSessionHandler
from floodmark.broker.fetch_sessions import FetchSessionCache
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.broker.replica_fetcher import ReplicaManager
from floodmark.broker.topic_metrics import BrokerTopicMetrics
from floodmark.client.connection import decode_response
from floodmark.controller.image import MetadataImage, TopicImage
from floodmark.errors import ErrorCode
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.storage.log import Log
from floodmark.wire.codec import decode_request
from floodmark.wire.hot import encode_replica_fetch_request

TOPIC = "bench"
TOPIC_ID = uuid.uuid4()
LEADER, FOLLOWER, EPOCH = 1, 2, 3


class Hooks:
    def __init__(self, purgatory: FetchPurgatory) -> None:
        self.purgatory = purgatory

    def wake_fetches(self, key: tuple[str, int]) -> None:
        self.purgatory.wake(key)

    def wake_replica_fetches(self, key: tuple[str, int]) -> None:
        self.purgatory.wake(key)

    def complete_produce(self, produce_id: int, error: ErrorCode, base_offset: int) -> None:
        pass

    def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None:
        pass

    def flush_log(self, key: tuple[str, int]) -> None:
        pass

    def checkpoint_due(self) -> None:
        pass


@dataclass
class Host:
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    purgatory: FetchPurgatory = field(default_factory=FetchPurgatory)
    topic_metrics: BrokerTopicMetrics | None = None
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)


def leader(n: int, directory: Path) -> tuple[Host, ReplicaManager]:
    host = Host()
    hooks = Hooks(host.purgatory)
    for p in range(n):
        ps = PartitionState(TOPIC, p, node_id=LEADER,
                            log=Log.open(str(directory / f"{TOPIC}-{p}"), now_ms=0),
                            hooks=hooks)
        ps.apply_metadata(PartitionRegistration((LEADER, FOLLOWER), (LEADER, FOLLOWER), LEADER,
                                                EPOCH, 0), 0)
        host.partitions[(TOPIC, p)] = ps
    image = MetadataImage()
    image.topics[TOPIC] = TopicImage(TOPIC, TOPIC_ID, {})
    return host, ReplicaManager(LEADER, lambda: image, lambda: int(time.time() * 1000))


async def one_round(host: Host, manager: ReplicaManager, n: int,
                    handler: FetchSessionHandler | None, correlation_id: int) -> tuple[int, int]:
    """One Fetch and its answer, both ways through the wire; (request bytes, answer bytes)."""
    wanted = {(TOPIC_ID, p): (p, EPOCH, 0, -1, 0, 1_048_576) for p in range(n)}
    if handler is None:
        frame = encode_replica_fetch_request(correlation_id, "replica-2", FOLLOWER, -1, 0, 1,
                                             10_485_760, [(TOPIC_ID, list(wanted.values()))])
    else:
        session = handler.build(wanted)
        frame = encode_replica_fetch_request(
            correlation_id, "replica-2", FOLLOWER, -1, 0, 1, 10_485_760, session.to_send,
            session_id=session.session_id, session_epoch=session.session_epoch,
            forgotten=session.forgotten)
    header, req = decode_request(frame[4:])
    encoded = await manager.answer_fetch(host, header, req)
    answer = b"".join(bytes(x) for x in encoded)
    resp: Any = decode_response(answer[4:], 1, 15, correlation_id)
    if handler is not None:
        named = [(t.topic_id, int(p.partition_index)) for t in resp.responses
                 for p in t.partitions]
        assert handler.handle_response(ErrorCode(int(resp.error_code)), int(resp.session_id),
                                       named)
    return len(frame), len(answer)


async def measure(n: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fetch-session-") as tmp:
        host, manager = leader(n, Path(tmp))
        handler = FetchSessionHandler()
        await one_round(host, manager, n, handler, 1)  # the full Fetch that opens the session
        await one_round(host, manager, n, None, 2)  # warm-up
        cpu: dict[str, list[float]] = {"full": [], "session": []}
        size: dict[str, tuple[int, int]] = {}
        for i in range(rounds):
            for kind in ("full", "session"):
                t0 = time.process_time()
                size[kind] = await one_round(host, manager, n,
                                             handler if kind == "session" else None, 10 + i)
                cpu[kind].append((time.process_time() - t0) * 1000)
        full = statistics.median(cpu["full"])
        sess = statistics.median(cpu["session"])
        return {"partitions": n, "full ms": round(full, 3), "session ms": round(sess, 3),
                "ratio": round(full / sess, 2) if sess else "-",
                "full bytes": f"{size['full'][0]}+{size['full'][1]}",
                "session bytes": f"{size['session'][0]}+{size['session'][1]}"}


async def leader_only(n: int, rounds: int) -> dict[str, Any]:
    """The leader's answer to one incremental session Fetch that names nothing, ``rounds``
    times (the session's epoch set back each time, so it is the same request)."""
    with tempfile.TemporaryDirectory(prefix="fetch-session-") as tmp:
        host, manager = leader(n, Path(tmp))
        handler = FetchSessionHandler()
        await one_round(host, manager, n, handler, 1)  # the full Fetch that opens the session
        session = handler.build({(TOPIC_ID, p): (p, EPOCH, 0, -1, 0, 1_048_576)
                                 for p in range(n)})
        frame = encode_replica_fetch_request(
            2, "replica-2", FOLLOWER, -1, 0, 1, 10_485_760, session.to_send,
            session_id=session.session_id, session_epoch=session.session_epoch,
            forgotten=session.forgotten)
        header, req = decode_request(frame[4:])
        cached = host.fetch_sessions.sessions[session.session_id]
        cpu = []
        for _ in range(rounds):
            cached.epoch = session.session_epoch
            t0 = time.process_time()
            await manager.answer_fetch(host, header, req)
            cpu.append((time.process_time() - t0) * 1000)
        return {"partitions": n, "leader round ms": round(statistics.median(cpu), 3),
                "us/partition": round(statistics.median(cpu) * 1000 / n, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="100,300,1000",
                    help="comma-separated partition counts")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--leader-only", action="store_true",
                    help="only the leader's answer to an idle session Fetch, --rounds times")
    args = ap.parse_args()
    print("load " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for n in (int(x) for x in args.partitions.split(",")):
        row = asyncio.run(leader_only(n, args.rounds) if args.leader_only
                          else measure(n, args.rounds))
        print(", ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    print("load after " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
