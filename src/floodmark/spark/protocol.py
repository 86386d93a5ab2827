"""A small Kafka wire-protocol client: just what the Spark reader needs.

Speaks the public Kafka protocol (no floodmark internals), so it works against any Kafka-compatible
broker. Hand-written codecs for four non-flexible request versions:

- Metadata v7      partitions, leaders, leader epochs
- ListOffsets v4   earliest / latest / by timestamp
- Fetch v11        record bytes plus, per partition, ``high_watermark``, ``last_stable_offset`` and
                   ``log_start_offset``. A Fetch with a tiny byte budget is also how the reader asks
                   for the high watermark: the Fetch response's HW is the one number every broker
                   must get right (some brokers answer ListOffsets(latest) with something else).

Versions are fixed, not negotiated with ApiVersions: every Kafka broker since 2.3 (and floodmark,
and Tansu) accepts them.

One blocking socket per broker, requests sent one at a time. Leader routing follows Metadata;
NOT_LEADER_OR_FOLLOWER and leader-epoch errors refresh it and retry a bounded number of times.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from floodmark.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3

FETCH_VERSION = 11
LIST_OFFSETS_VERSION = 4
METADATA_VERSION = 7

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

_RETRIABLE = {
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
    int(ErrorCode.LEADER_NOT_AVAILABLE),
    int(ErrorCode.FENCED_LEADER_EPOCH),
    int(ErrorCode.UNKNOWN_LEADER_EPOCH),
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    int(ErrorCode.NOT_ENOUGH_REPLICAS),
    int(ErrorCode.REQUEST_TIMED_OUT),
}
_MAX_FRAME_BYTES = 512 * 1024 * 1024


class ProtocolError(Exception):
    """The broker answered something this client cannot parse."""


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class FetchedPartition:
    """One partition of a Fetch response. ``records`` is a memoryview over the response frame."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[tuple[int, int], ...]  # (producer_id, first_offset)
    records: memoryview


@dataclass(frozen=True)
class OffsetBounds:
    """What the broker says about one partition right now."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    def end_for(self, isolation_level: int) -> int:
        """The first offset a reader must not see: HW, or LSO under read_committed."""
        if isolation_level == READ_COMMITTED and self.last_stable_offset >= 0:
            return min(self.high_watermark, self.last_stable_offset)
        return self.high_watermark


# ---------------------------------------------------------------- primitive encoding
class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i8(self, v: int) -> None:
        self.parts.append(struct.pack(">b", v))

    def i16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def i32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def i64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def string(self, s: str | None) -> None:
        if s is None:
            self.i16(-1)
            return
        b = s.encode()
        self.i16(len(b))
        self.parts.append(b)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.buf):
            raise ProtocolError("response truncated")
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return int(v)

    def i8(self) -> int:
        return self._take(">b", 1)

    def i16(self) -> int:
        return self._take(">h", 2)

    def i32(self) -> int:
        return self._take(">i", 4)

    def i64(self) -> int:
        return self._take(">q", 8)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = bytes(self.buf[self.pos : self.pos + n]).decode()
        self.pos += n
        return s

    def raw(self, n: int) -> memoryview:
        if self.pos + n > len(self.buf):
            raise ProtocolError("response truncated")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v


# ---------------------------------------------------------------- one connection
class BrokerConnection:
    """A blocking connection to one broker. Not thread-safe; one request in flight."""

    def __init__(self, host: str, port: int, client_id: str, timeout_ms: int) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self._sock: socket.socket | None = None
        self._correlation_id = 0

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_ms / 1000)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            self._sock = sock
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def request(self, api_key: int, api_version: int, body: bytes, timeout_ms: int) -> memoryview:
        """Send one request and return the response body (after the v0 response header)."""
        sock = self._connect()
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        w = _Writer()
        w.i16(api_key)
        w.i16(api_version)
        w.i32(cid)
        w.string(self.client_id)
        header = w.bytes()
        try:
            sock.settimeout(timeout_ms / 1000)
            sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            size = struct.unpack(">i", self._recv_exact(sock, 4))[0]
            if size < 4 or size > _MAX_FRAME_BYTES:
                raise ProtocolError(f"bad response frame size {size}")
            frame = self._recv_exact(sock, size)
        except (OSError, ProtocolError):
            self.close()
            raise
        got = struct.unpack_from(">i", frame, 0)[0]
        if got != cid:
            self.close()
            raise ProtocolError(f"correlation id {got} != {cid}")
        return memoryview(frame)[4:]

    @staticmethod
    def _recv_exact(sock: socket.socket, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k
        return buf


# ---------------------------------------------------------------- the client
def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ValueError("kafka.bootstrap.servers is empty")
    return out


class KafkaClient:
    """Metadata, offsets and fetches for a set of topics, routed to partition leaders."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "floodmark-spark",
        request_timeout_ms: int = 30_000,
        isolation_level: int = READ_UNCOMMITTED,
        retries: int = 100,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.isolation_level = isolation_level
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self._brokers: dict[int, tuple[str, int]] = {}
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._partitions: dict[tuple[str, int], PartitionInfo] = {}
        self._topic_partitions: dict[str, list[int]] = {}
        # One request at a time per client (a prefetch thread and its caller share it).
        self._lock = threading.RLock()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    def _conn(self, addr: tuple[str, int]) -> BrokerConnection:
        c = self._conns.get(addr)
        if c is None:
            c = BrokerConnection(addr[0], addr[1], self.client_id, self.request_timeout_ms)
            self._conns[addr] = c
        return c

    def _any_request(self, api_key: int, version: int, body: bytes) -> memoryview:
        """Send to any reachable broker (bootstrap first, then known brokers)."""
        last: Exception | None = None
        for addr in [*self.bootstrap, *self._brokers.values()]:
            try:
                return self._conn(addr).request(api_key, version, body, self.request_timeout_ms)
            except (OSError, ProtocolError) as exc:
                last = exc
        raise ConnectionError(f"no broker reachable at {self.bootstrap}: {last}")

    # ---- Metadata
    def refresh_metadata(self, topics: Iterable[str] | None) -> dict[str, list[int]]:
        """Fetch metadata for ``topics`` (None = all topics); returns topic -> sorted partitions."""
        with self._lock:
            return self._refresh_metadata(topics)

    def _refresh_metadata(self, topics: Iterable[str] | None) -> dict[str, list[int]]:
        w = _Writer()
        if topics is None:
            w.i32(-1)
        else:
            tl = list(topics)
            w.i32(len(tl))
            for t in tl:
                w.string(t)
        w.i8(0)  # allow_auto_topic_creation = false
        r = _Reader(self._any_request(API_METADATA, METADATA_VERSION, w.bytes()))
        r.i32()  # throttle
        for _ in range(r.i32()):
            node_id = r.i32()
            host = r.string() or "localhost"
            port = r.i32()
            r.string()  # rack
            self._brokers[node_id] = (host, port)
        r.string()  # cluster id
        r.i32()  # controller id
        out: dict[str, list[int]] = {}
        for _ in range(r.i32()):
            err = r.i16()
            name = r.string() or ""
            r.i8()  # is_internal
            parts = []
            for _ in range(r.i32()):
                perr = r.i16()
                pidx = r.i32()
                leader = r.i32()
                epoch = r.i32()
                for _ in range(r.i32()):
                    r.i32()  # replicas
                for _ in range(r.i32()):
                    r.i32()  # isr
                for _ in range(r.i32()):
                    r.i32()  # offline
                del perr
                self._partitions[(name, pidx)] = PartitionInfo(name, pidx, leader, epoch)
                parts.append(pidx)
            if err == int(ErrorCode.NONE):
                out[name] = sorted(parts)
                self._topic_partitions[name] = sorted(parts)
        return out

    def partitions_for(self, topic: str) -> list[int]:
        """Partitions of ``topic``; [] when the broker does not know the topic."""
        return self.refresh_metadata([topic]).get(topic, [])

    def all_topics(self) -> list[str]:
        return sorted(t for t in self.refresh_metadata(None) if not t.startswith("__"))

    def _leader_conn(self, topic: str, partition: int) -> tuple[BrokerConnection, int]:
        info = self._partitions.get((topic, partition))
        if info is None or info.leader_id < 0 or info.leader_id not in self._brokers:
            self.refresh_metadata([topic])
            info = self._partitions.get((topic, partition))
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        if info.leader_id < 0 or info.leader_id not in self._brokers:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return self._conn(self._brokers[info.leader_id]), info.leader_epoch

    def _with_retries(self, topic: str, partition: int, what: str, fn):  # type: ignore[no-untyped-def]
        with self._lock:
            return self._with_retries_locked(topic, partition, what, fn)

    def _with_retries_locked(self, topic: str, partition: int, what: str, fn):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        attempt = 0
        while True:
            try:
                return fn()
            except KafkaError as exc:
                retriable = int(exc.code) in _RETRIABLE
                err: Exception = exc
            except (OSError, ProtocolError) as exc:
                retriable = True
                err = exc
            attempt += 1
            if not retriable or attempt > self.retries or time.monotonic() > deadline:
                raise err
            log.info("%s %s-%d: %s; refreshing metadata (attempt %d)", what, topic, partition,
                     err, attempt)
            # a leader election takes a few seconds: back off up to 1 s, bounded by the deadline
            time.sleep(min(1.0, self.retry_backoff_ms / 1000 * 2 ** min(attempt - 1, 4)))
            self._partitions.pop((topic, partition), None)

    # ---- ListOffsets
    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """ListOffsets for one partition: -2 earliest, -1 latest, else first offset with ts >= it.

        Returns -1 when no record has a timestamp >= ``timestamp``.
        """

        def once() -> int:
            conn, epoch = self._leader_conn(topic, partition)
            w = _Writer()
            w.i32(-1)
            w.i8(self.isolation_level)
            w.i32(1)
            w.string(topic)
            w.i32(1)
            w.i32(partition)
            w.i32(epoch)
            w.i64(timestamp)
            r = _Reader(conn.request(API_LIST_OFFSETS, LIST_OFFSETS_VERSION, w.bytes(),
                                     self.request_timeout_ms))
            r.i32()
            for _ in range(r.i32()):
                r.string()
                for _ in range(r.i32()):
                    r.i32()
                    err = r.i16()
                    r.i64()  # timestamp
                    offset = r.i64()
                    r.i32()  # leader epoch
                    if err != int(ErrorCode.NONE):
                        raise KafkaError(ErrorCode(err), f"ListOffsets {topic}-{partition}")
                    return offset
            raise ProtocolError("ListOffsets response without the partition")

        return int(self._with_retries(topic, partition, "ListOffsets", once))

    # ---- Fetch
    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int,
              max_wait_ms: int = 0, min_bytes: int = 1) -> FetchedPartition:
        def once() -> FetchedPartition:
            conn, epoch = self._leader_conn(topic, partition)
            w = _Writer()
            w.i32(-1)  # replica id: a consumer
            # At least 1 ms: some brokers (Tansu 0.6) answer max_wait_ms=0 with no partitions.
            w.i32(max(1, max_wait_ms))
            w.i32(min_bytes)
            w.i32(max_bytes)
            w.i8(self.isolation_level)
            w.i32(0)  # session id: no fetch session
            w.i32(-1)  # session epoch: full fetch, no session
            w.i32(1)
            w.string(topic)
            w.i32(1)
            w.i32(partition)
            w.i32(epoch)
            w.i64(offset)
            w.i64(-1)  # log start offset (followers only)
            w.i32(max_bytes)
            w.i32(0)  # forgotten topics
            w.string("")  # rack id
            r = _Reader(conn.request(API_FETCH, FETCH_VERSION, w.bytes(),
                                     self.request_timeout_ms + max_wait_ms))
            r.i32()  # throttle
            top_err = r.i16()
            r.i32()  # session id
            if top_err != int(ErrorCode.NONE):
                raise KafkaError(ErrorCode(top_err), f"Fetch {topic}-{partition}")
            for _ in range(r.i32()):
                r.string()
                for _ in range(r.i32()):
                    r.i32()
                    err = r.i16()
                    hw = r.i64()
                    lso = r.i64()
                    lstart = r.i64()
                    n_aborted = r.i32()
                    aborted = tuple((r.i64(), r.i64()) for _ in range(max(n_aborted, 0)))
                    r.i32()  # preferred read replica
                    size = r.i32()
                    records = r.raw(size) if size > 0 else memoryview(b"")
                    if err in _RETRIABLE and err != int(ErrorCode.NONE):
                        raise KafkaError(ErrorCode(err), f"Fetch {topic}-{partition}")
                    return FetchedPartition(err, hw, lso, lstart, aborted, records)
            raise ProtocolError("Fetch response without the partition")

        result: FetchedPartition = self._with_retries(topic, partition, "Fetch", once)
        return result

    def bounds(self, topic: str, partition: int) -> OffsetBounds:
        """Log start offset, high watermark and LSO of one partition, from a Fetch response.

        The fetch asks for the log start offset itself with a 1-byte budget, so the broker returns
        at most one batch we throw away. An OFFSET_OUT_OF_RANGE answer (possible when the log start
        moved between our two numbers) still carries the HW and log start in Kafka brokers, but not
        in all, so fall back to ListOffsets(earliest) and retry once.
        """
        start = self.list_offset(topic, partition, EARLIEST_TIMESTAMP)
        for _ in range(3):
            fp = self.fetch(topic, partition, max(start, 0), max_bytes=1)
            if fp.error_code == int(ErrorCode.NONE):
                lstart = fp.log_start_offset if fp.log_start_offset >= 0 else start
                return OffsetBounds(lstart, fp.high_watermark, fp.last_stable_offset)
            if fp.error_code != int(ErrorCode.OFFSET_OUT_OF_RANGE):
                raise KafkaError(ErrorCode(fp.error_code), f"Fetch {topic}-{partition}")
            start = self.list_offset(topic, partition, EARLIEST_TIMESTAMP)
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"bounds of {topic}-{partition}")


def isolation_from_config(value: str | None) -> int:
    if value is None or value.lower() == "read_uncommitted":
        return READ_UNCOMMITTED
    if value.lower() == "read_committed":
        return READ_COMMITTED
    raise ValueError(f"kafka.isolation.level must be read_committed or read_uncommitted, not {value}")
