"""read_committed across a restart of every broker (issue 28), on a real 3-broker cluster.

Three transactional confluent-kafka producers loop: begin, 1-4 records (values of 256 B to 6 KiB,
random sizes) over random partitions of two topics (2 partitions each, RF=3,
min.insync.replicas=2), wait for their acks, then commit (80 %) or abort (20 %). Every partition
is then read from the start to its high watermark by read_committed and read_uncommitted
consumers; every broker is restarted in turn (SIGTERM, SIGKILL, SIGTERM; each back in every ISR
before the next) and everything is read again. Both reads must show exactly the committed
records: no lost commit, no aborted read, no torn transaction, no duplicate, every acknowledged
record in read_uncommitted, and read_committed reaching LSO = HW on every partition.

Issue 28: at start-up a broker rebuilt each segment's aborted-transactions index from a scan of
the log that read 64 KiB chunks and re-read only when a batch's 61-byte header did not fit; a
78-byte COMMIT/ABORT marker whose body crossed the chunk's end was misread and its transaction
left open. Random sizes alone put a marker there about once per 3,900 markers (17 bad byte
positions per 64 KiB scanned), too rarely for a test. So while a producer holds a partition (a
lock per partition: one transaction at a time writes to it, its marker included), it reads
where the partition's segment ends on disk, replays the chunk boundaries such a scan takes, and,
when the next boundary is within ``FILLER_MAX_BYTES``, adds one more record to the transaction,
sized so that the marker starts 61-77 bytes before the boundary: its header fits the chunk, its
body does not. The workload runs until every partition has ``AIMED_PER_PARTITION`` such markers.
"""

from __future__ import annotations

import random
import signal
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from floodmark.client.fetch import FetchClient, OffsetBounds
from floodmark.cluster import LocalCluster, waiting
from floodmark.constants import READ_COMMITTED
from floodmark.records import HEADER_SIZE, BatchHeader
from floodmark.storage.segment import SCAN_CHUNK_BYTES
from tests.cluster.helpers import cluster_progress, start_cluster, wait_progress
from tests.compat.txn_helpers import create_topic, end_transaction

pytestmark = pytest.mark.integration

TOPICS = ("txr-a", "txr-b")
PARTITIONS = 2
TPS: tuple[tuple[str, int], ...] = tuple((t, p) for t in TOPICS for p in range(PARTITIONS))
PRODUCERS = 3
COMMIT_RATE = 0.8
VALUE_BYTES = (256, 6144)

# The scan that misread markers (storage.segment.scan_batches at b957c72): chunks of 64 KiB (the
# default of LogConfig.scan_chunk_bytes); a new chunk is read at a batch whose header does not fit
# the current one.
MARKER_BYTES = 78  # a control batch holding one COMMIT/ABORT record
MIN_BATCH_BYTES = 68  # a batch of one record with an empty value
FILLER_MAX_BYTES = 8192
AIMED_PER_PARTITION = 8

# Bounds of the workload (it normally ends on AIMED_PER_PARTITION, in a few hundred transactions).
MAX_TXNS_PER_PRODUCER = 600
WORKLOAD_LIMIT_S = 150.0
STALL_S = 30.0  # a wait fails when what it watches has not moved for this long
READ_STALL_S = 20.0  # a read stops when its consumer's positions have not moved for this long

TP = tuple[str, int]


# -- where a chunked scan cuts a partition's segment ---------------------------------------------

def _batch_bytes(value_len: int) -> int:
    """Bytes of a v2 batch holding one record with no key, no headers, this value (what
    librdkafka writes for one uncompressed record)."""
    def varint_len(n: int) -> int:
        zigzag = n << 1
        size = 1
        while zigzag >= 0x80:
            zigzag >>= 7
            size += 1
        return size

    body = 1 + 1 + 1 + 1 + varint_len(value_len) + value_len + 1  # attrs ts off key len v hdrs
    return HEADER_SIZE + varint_len(body) + body


class ScanLayout:
    """One partition's newest segment as a 64 KiB chunked scan from its start sees it: where its
    current chunk starts. Touched only by the holder of the partition's lock."""

    def __init__(self, cluster: LocalCluster, tp: TP) -> None:
        self.dirs = [cluster.partition_dir(b, *tp) for b in cluster.broker_ids]
        self.segment = ""
        self.scanned = 0  # file position up to which whole batches were replayed
        self.chunk_start = 0
        self.aimed: list[int] = []  # file positions of markers placed at a chunk boundary

    def _newest(self) -> tuple[str, int, Path]:
        """The replica segment that is furthest ahead (the leader's, or one as long): its name,
        size and path."""
        newest = [(logs[-1].name, waiting.file_size(logs[-1]), logs[-1])
                  for d in self.dirs if (logs := sorted(d.glob("*.log")))]
        assert newest, f"no segment in {self.dirs}"
        return max(newest)

    def size(self) -> int:
        return self._newest()[1]

    def end(self) -> int:
        """Replay the batches written since the last call; the segment's end position."""
        _name, size, path = self._newest()
        if path.name != self.segment:  # a new segment: its scan starts at 0
            self.segment, self.scanned, self.chunk_start = path.name, 0, 0
        with open(path, "rb") as fh:
            fh.seek(self.scanned)
            data = fh.read(size - self.scanned)
        pos = 0
        while pos + HEADER_SIZE <= len(data):  # whole batches only
            header = BatchHeader(data, pos)
            if pos + header.size > len(data):
                break
            position = self.scanned + pos
            if position - self.chunk_start + HEADER_SIZE > SCAN_CHUNK_BYTES:
                self.chunk_start = position
            pos += header.size
        self.scanned += pos
        return self.scanned

    def aim(self, end: int, rng: random.Random) -> tuple[int, int] | None:
        """(value length, marker position): a one-record batch at ``end`` after which the next
        batch (the marker) starts 61-77 bytes before a chunk boundary; None when the boundary is
        not within reach."""
        start = self.chunk_start if end - self.chunk_start + HEADER_SIZE <= SCAN_CHUNK_BYTES \
            else end
        boundary = start + SCAN_CHUNK_BYTES
        window = list(range(boundary - MARKER_BYTES + 1, boundary - HEADER_SIZE + 1))
        rng.shuffle(window)
        for marker in window:
            batch = marker - end
            if not MIN_BATCH_BYTES <= batch <= FILLER_MAX_BYTES:
                continue
            # A one-record batch is its value plus 68-72 bytes.
            for value_len in range(max(0, batch - 72), batch - 67):
                if _batch_bytes(value_len) == batch:
                    return value_len, marker
        return None


# -- the workload --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rec:
    tp: TP
    offset: int
    value: bytes


def _rec(msg: Message) -> Rec:
    """The (topic, partition, offset, value) of a delivered or consumed message."""
    topic, partition, offset, value = msg.topic(), msg.partition(), msg.offset(), msg.value()
    assert topic is not None and partition is not None and offset is not None, msg
    assert isinstance(value, bytes), (topic, partition, offset, value)
    return Rec((topic, partition), offset, value)


@dataclass
class Txn:
    txn_id: str
    committed: bool
    records: list[Rec] = field(default_factory=list)
    aimed: list[TP] = field(default_factory=list)  # partitions whose marker was placed


@dataclass
class Workload:
    cluster: LocalCluster
    layouts: dict[TP, ScanLayout]
    locks: dict[TP, threading.Lock]
    deadline: float
    txns: list[Txn] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enough(self) -> bool:
        return (self.stop.is_set() or time.monotonic() > self.deadline
                or all(len(lay.aimed) >= AIMED_PER_PARTITION for lay in self.layouts.values()))

    def aimed(self) -> int:
        return sum(len(lay.aimed) for lay in self.layouts.values())


@contextmanager
def _holding(locks: list[threading.Lock]) -> Iterator[None]:
    with ExitStack() as stack:
        for lk in locks:
            stack.enter_context(lk)
        yield


def _produce_acked(p: Producer, txn: Txn, sends: list[tuple[TP, bytes]]) -> None:
    """Send, flush, and record each record at its acknowledged offset."""
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            txn.records.append(_rec(msg))

    for (topic, partition), value in sends:
        p.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
    assert p.flush(60) == 0, f"{txn.txn_id}: records still in flight after 60 s"
    assert not errors, f"{txn.txn_id}: {errors}"


def _await_markers(w: Workload, ends: dict[TP, int]) -> None:
    """Until the marker of the transaction just ended is in each of its partitions' logs."""
    def sizes() -> dict[str, object]:
        return {f"{t}-{p} bytes": w.layouts[(t, p)].size() for t, p in ends}

    wait_progress(lambda: all(w.layouts[tp].size() >= end + MARKER_BYTES
                              for tp, end in ends.items()),
                  lambda: {**sizes(), **cluster_progress(w.cluster)}, STALL_S,
                  f"the markers of the transaction ending at {ends}", step_s=0.005)


def _producer_loop(w: Workload, index: int, seed: int) -> None:
    rng = random.Random(seed)
    p = Producer({"bootstrap.servers": w.cluster.bootstrap, "linger.ms": 5,
                  "transactional.id": f"txr-{index}-{uuid.uuid4().hex[:8]}"})
    try:
        p.init_transactions(60)
        for n in range(MAX_TXNS_PER_PRODUCER):
            if w.enough():
                break
            txn = Txn(f"p{index}-{n}", rng.random() < COMMIT_RATE)
            sends: list[tuple[TP, bytes]] = []
            for i in range(rng.randint(1, 4)):
                pad = rng.randint(*VALUE_BYTES)
                sends.append((rng.choice(TPS), f"{txn.txn_id}/{i}:".encode().ljust(pad, b".")))
            held = sorted({tp for tp, _ in sends})
            with _holding([w.locks[tp] for tp in held]):
                p.begin_transaction()
                _produce_acked(p, txn, sends)
                ends = {tp: w.layouts[tp].end() for tp in held}
                fillers: list[tuple[TP, bytes]] = []
                for tp in held:
                    aim = w.layouts[tp].aim(ends[tp], rng)
                    if aim is not None:
                        value_len, marker = aim
                        name = f"{txn.txn_id}/f{len(fillers)}:".encode()
                        fillers.append((tp, name.ljust(value_len, b"f")))
                        ends[tp] = marker
                if fillers:
                    _produce_acked(p, txn, fillers)
                    for tp, _value in fillers:
                        end = w.layouts[tp].end()
                        assert end == ends[tp], (
                            f"{txn.txn_id}: the filler of {tp} ended at {end}, not {ends[tp]}")
                end_transaction(p, txn.committed)
                _await_markers(w, ends)
                for tp in held:  # the marker, and nothing else, right where it was expected
                    end = w.layouts[tp].end()
                    assert end == ends[tp] + MARKER_BYTES, (
                        f"{txn.txn_id}: {tp} ends at {end}, not {ends[tp]} + one marker")
                for tp, _value in fillers:
                    w.layouts[tp].aimed.append(ends[tp])
                    txn.aimed.append(tp)
            with w.lock:
                w.txns.append(txn)
    except BaseException as exc:  # reported by the test's thread
        w.errors.append(f"producer {index}: {type(exc).__name__}: {exc}")
        w.stop.set()
    finally:
        p.flush(10)


# -- reading it back -----------------------------------------------------------------------------

@dataclass
class Read:
    isolation: str
    records: dict[TP, dict[int, bytes]]
    positions: dict[TP, int]
    duplicates: list[str]
    stalled: str | None


def _read(bootstrap: str, isolation: str, ends: dict[TP, int]) -> Read:
    """Every record a consumer in ``isolation`` reads from offset 0 until its position reaches
    ``ends`` on every partition; stops (``stalled``) when its positions stop moving."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.wait.max.ms": 100})
    tps = [TopicPartition(t, p, 0) for t, p in ends]
    c.assign(tps)
    read = Read(isolation, defaultdict(dict), dict.fromkeys(ends, 0), [], None)

    def done() -> bool:
        for m in c.consume(1000, 0.2):
            if m.error() is not None:
                continue
            r = _rec(m)
            if r.offset in read.records[r.tp]:
                read.duplicates.append(f"{r.tp[0]}-{r.tp[1]}@{r.offset}")
            read.records[r.tp][r.offset] = r.value
        for tp_pos in c.position(tps):
            read.positions[(tp_pos.topic, tp_pos.partition)] = max(tp_pos.offset, 0)
        return all(read.positions[tp] >= end for tp, end in ends.items())

    try:
        waiting.wait_progress(done, lambda: {"positions": dict(read.positions)},
                              what=f"{isolation} consumer reading to {ends}",
                              stall_ms=int(READ_STALL_S * 1000), step_s=0)
    except waiting.Stalled as exc:
        read.stalled = str(exc)
    finally:
        c.close()
    return read


def _bounds(bootstrap: str) -> dict[TP, OffsetBounds]:
    reader = FetchClient(bootstrap, isolation_level=READ_COMMITTED, request_timeout_ms=5000)
    try:
        return {tp: reader.bounds(*tp) for tp in TPS}
    finally:
        reader.close()


def _settled_bounds(cluster: LocalCluster, want: dict[TP, int] | None) -> dict[TP, OffsetBounds]:
    """The partitions' bounds once every leader answers (and, with ``want``, once every HW is
    there again)."""
    last: dict[TP, OffsetBounds] = {}

    def ask() -> dict[TP, OffsetBounds] | None:
        nonlocal last
        try:
            last = _bounds(cluster.bootstrap)
        except Exception:  # a leader moving or loading: ask again
            return None
        if want is not None and any(last[tp].high_watermark != hw for tp, hw in want.items()):
            return None
        return last

    settled: dict[TP, OffsetBounds] = wait_progress(
        ask, lambda: {"bounds": dict(last), **cluster_progress(cluster)}, STALL_S,
        "every partition's leader answering with its HW")
    return settled


def _name(tp: TP, offsets: list[int]) -> str:
    offsets = sorted(offsets)
    runs: list[str] = []
    start = prev = offsets[0]
    for o in [*offsets[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    return f"{tp[0]}-{tp[1]}@{','.join(runs)}"


ByTxn = dict[str, dict[TP, list[int]]]


def _by_txn() -> ByTxn:
    return defaultdict(lambda: defaultdict(list))


@dataclass
class Findings:
    """The anomalies of one pair of reads (read_committed, read_uncommitted)."""

    label: str
    lost: ByTxn = field(default_factory=_by_txn)  # committed, below where read_committed got
    aborted_reads: ByTxn = field(default_factory=_by_txn)
    behind_lso: ByTxn = field(default_factory=_by_txn)  # committed, past a pinned LSO
    torn: list[str] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # duplicates, strangers, ru misses, stalls

    def counts(self) -> str:
        def n(found: ByTxn) -> str:
            records = sum(len(o) for by_tp in found.values() for o in by_tp.values())
            return f"{records} record(s) of {len(found)} txn(s)"

        return (f"{self.label}: lost commits {n(self.lost)}, aborted reads "
                f"{n(self.aborted_reads)}, torn transactions {len(self.torn)}, partitions "
                f"whose LSO is pinned below the HW {len(self.pinned)} (committed records behind "
                f"it: {n(self.behind_lso)}), other anomalies {len(self.other)}")

    def lines(self) -> list[str]:
        out: list[str] = []

        def listing(kind: str, found: ByTxn) -> None:
            if found:
                out.append(f"{kind}: " + "; ".join(
                    f"{txn_id}: " + " ".join(_name(tp, o) for tp, o in by_tp.items())
                    for txn_id, by_tp in list(found.items())[:12]))

        listing("lost commits", self.lost)
        listing("aborted reads", self.aborted_reads)
        if self.torn:
            out.append(f"torn transactions: {', '.join(self.torn[:12])}")
        if self.pinned:
            out.append("LSO pinned below the HW (a transaction left open): "
                       + "; ".join(self.pinned))
        listing("committed records behind a pinned LSO", self.behind_lso)
        out.extend(self.other)
        return [f"  {self.label}: {line}" for line in out]

    def __bool__(self) -> bool:
        return bool(self.lost or self.aborted_reads or self.behind_lso or self.torn
                    or self.pinned or self.other)


def _check(label: str, txns: list[Txn], committed: Read, uncommitted: Read,
           bounds: dict[TP, OffsetBounds]) -> Findings:
    found = Findings(label)
    owner = {(r.tp, r.offset): (t, r) for t in txns for r in t.records}
    for t in txns:
        seen = [r for r in t.records if committed.records[r.tp].get(r.offset) == r.value]
        if not t.committed:
            for r in seen:
                found.aborted_reads[f"{t.txn_id} (aborted)"][r.tp].append(r.offset)
            continue
        for r in t.records:
            if committed.records[r.tp].get(r.offset) != r.value:
                reached = r.offset < committed.positions[r.tp]
                (found.lost if reached else found.behind_lso)[f"{t.txn_id} (committed)"][
                    r.tp].append(r.offset)
        if seen and len(seen) < len(t.records):
            found.torn.append(f"{t.txn_id} ({len(seen)} of {len(t.records)} records visible)")
    for read in (committed, uncommitted):
        if read.duplicates:
            found.other.append(f"{read.isolation} duplicates: {read.duplicates[:12]}")
        strangers = [f"{tp[0]}-{tp[1]}@{o}" for tp, by in read.records.items()
                     for o, v in by.items()
                     if (tp, o) not in owner or owner[(tp, o)][1].value != v]
        if strangers:
            found.other.append(f"{read.isolation} records no transaction wrote there: "
                               f"{strangers[:12]}")
    missing = [f"{r.tp[0]}-{r.tp[1]}@{r.offset}" for t in txns for r in t.records
               if uncommitted.records[r.tp].get(r.offset) != r.value]
    if missing:
        found.other.append(f"read_uncommitted misses {len(missing)} acknowledged record(s): "
                           f"{missing[:12]}")
    if uncommitted.stalled:
        found.other.append(f"read_uncommitted stopped: {uncommitted.stalled}")
    for tp, b in bounds.items():
        lso = b.last_stable_offset if b.last_stable_offset >= 0 else b.high_watermark
        if lso < b.high_watermark:
            holder = owner.get((tp, lso))
            found.pinned.append(
                f"{tp[0]}-{tp[1]} LSO {lso} HW {b.high_watermark}, read_committed stopped at "
                f"{committed.positions[tp]}"
                + (f" ({holder[0].txn_id}'s record is there)" if holder else ""))
        elif committed.positions[tp] < b.high_watermark:
            found.other.append(f"read_committed stopped at {tp[0]}-{tp[1]}@"
                               f"{committed.positions[tp]} below LSO = HW {b.high_watermark}: "
                               f"{committed.stalled}")
    return found


def _summary(txns: list[Txn], aimed: int) -> str:
    commits = sum(t.committed for t in txns)
    return (f"{len(txns)} transactions ({commits} commits, {len(txns) - commits} aborts, "
            f"{sum(len(t.records) for t in txns)} records); {aimed} markers placed where a "
            f"{SCAN_CHUNK_BYTES // 1024} KiB scan chunk cuts them after their header")


# -- restarts --------------------------------------------------------------------------------------

def _in_every_isr(cluster: LocalCluster, broker: int) -> bool:
    status = cluster.controller_status()
    if status is None:
        return False
    for topic, partition in TPS:
        reg = status["topics"].get(topic, {}).get(str(partition))
        if not reg or broker not in reg["isr"] or int(reg["leader"]) <= 0:
            return False
    return True


def _restart(cluster: LocalCluster, broker: int, sig: int) -> None:
    cluster.kill(broker, sig)  # returns once the process has ended
    cluster.start_node(broker)
    wait_progress(lambda: _in_every_isr(cluster, broker), lambda: cluster_progress(cluster),
                  STALL_S, f"broker {broker} back in the ISR of every partition")


def _ends(bounds: dict[TP, OffsetBounds]) -> dict[TP, int]:
    return {tp: b.high_watermark for tp, b in bounds.items()}


def _read_both(cluster: LocalCluster, label: str, txns: list[Txn],
               want: dict[TP, int] | None) -> tuple[dict[TP, int], Findings]:
    bounds = _settled_bounds(cluster, want)
    ends = _ends(bounds)
    committed = _read(cluster.bootstrap, "read_committed", ends)
    uncommitted = _read(cluster.bootstrap, "read_uncommitted", ends)
    return ends, _check(label, txns, committed, uncommitted, _bounds(cluster.bootstrap))


def test_read_committed_survives_a_restart_of_every_broker(tmp_path: Path) -> None:
    started = time.monotonic()
    cluster = start_cluster(tmp_path / "txn-restart")
    try:
        for topic in TOPICS:
            create_topic(cluster.bootstrap, topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
        wait_progress(lambda: all(_in_every_isr(cluster, b) for b in cluster.broker_ids),
                      lambda: cluster_progress(cluster), STALL_S, "every partition's full ISR")
        w = Workload(cluster, {tp: ScanLayout(cluster, tp) for tp in TPS},
                     {tp: threading.Lock() for tp in TPS}, time.monotonic() + WORKLOAD_LIMIT_S)
        seed = random.randrange(1 << 30)
        threads = [threading.Thread(target=_producer_loop, args=(w, i, seed + i), daemon=True,
                                    name=f"txn-producer-{i}") for i in range(PRODUCERS)]
        for t in threads:
            t.start()

        def produced() -> dict[str, object]:
            return {"transactions": len(w.txns), **cluster_progress(cluster)}

        wait_progress(lambda: not any(t.is_alive() for t in threads), produced, STALL_S,
                      "the producers ending")
        assert not w.errors, w.errors
        summary = _summary(w.txns, w.aimed()) + f" (seed {seed})"
        # The layout that failed is there (else the test would prove nothing).
        assert all(len(lay.aimed) >= AIMED_PER_PARTITION for lay in w.layouts.values()), (
            f"the workload ended before placing {AIMED_PER_PARTITION} markers per partition: "
            f"{summary}")
        assert sum(not t.committed for t in w.txns) >= 10, summary
        workload_s = time.monotonic() - started

        ends, before = _read_both(cluster, "before the restarts", w.txns, None)
        restarts = [(1, signal.SIGTERM), (2, signal.SIGKILL), (3, signal.SIGTERM)]
        for broker, sig in restarts:
            _restart(cluster, broker, sig)
        _, after = _read_both(cluster, "after restarting brokers " + ", ".join(
            f"{b} ({signal.Signals(s).name})" for b, s in restarts), w.txns, ends)
        if before or after:
            pytest.fail("\n".join([summary, before.counts(), after.counts(), *before.lines(),
                                   *after.lines()]), pytrace=False)
        print(f"{summary}; workload {workload_s:.0f} s, "
              f"in all {time.monotonic() - started:.0f} s")
    finally:
        cluster.stop()
