"""Test helpers that talk to a broker with librdkafka (confluent-kafka), independently of the
connector under test: create/delete topics, produce records and learn their offsets."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int,
                 config: dict[str, str] | None = None) -> None:
    a = admin(bootstrap)  # keep a reference: the futures die with their client
    a.create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                    request_timeout=15)[topic].result(timeout=30)
    # wait until metadata shows every partition with a leader (bounded)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = a.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def log_start_offset(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso-probe"})
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low)
    finally:
        c.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    a = admin(bootstrap)
    a.delete_topics([topic], request_timeout=15)[topic].result(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        md = a.list_topics(timeout=5)
        if topic not in md.topics:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not deleted")


def produce(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    partitions: int,
    start: int = 0,
    base_ts_ms: int = 1_700_000_000_000,
    headers: bool = True,
    flush_every: int = 0,
) -> list[Produced]:
    """Produce n records round-robin over partitions; values are unique (``v<i>``).

    Every 7th record has a null key; every 3rd carries two headers (one with a null value).
    Returns what the broker acknowledged, with the offsets it assigned.
    """
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})
    out: list[Produced] = []
    errors: list[str] = []
    sent_headers: dict[bytes, tuple[tuple[str, bytes | None], ...]] = {}

    def cb(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))
            return
        out.append(Produced(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                            msg.timestamp()[1], sent_headers[msg.value()]))

    for i in range(start, start + n):
        hdrs = [("src", b"test"), ("nothing", None)] if headers and i % 3 == 0 else None
        sent_headers[b"v%d" % i] = tuple(hdrs or ())
        p.produce(topic, value=b"v%d" % i, key=None if i % 7 == 0 else b"k%d" % (i % 11),
                  partition=i % partitions, timestamp=base_ts_ms + i, headers=hdrs,
                  on_delivery=cb)
        if flush_every and (i + 1) % flush_every == 0:
            p.flush(30)
    assert p.flush(60) == 0, "not every record was acknowledged"
    assert not errors, errors
    assert len(out) == n
    return sorted(out, key=lambda r: (r.partition, r.offset))


class HighWatermarkCapProxy:
    """A TCP proxy in front of a real broker that lowers the high watermark (and LSO) in Fetch v11
    responses to ``cap`` while passing every record byte through unchanged.

    That is what a consumer sees from a leader whose followers lag: the log holds records beyond
    the HW. The reader must use the HW, never the records it happens to receive.
    """

    def __init__(self, upstream: str, cap: int) -> None:
        import socket
        import threading

        self.cap = cap
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.bootstrap = f"127.0.0.1:{self._server.getsockname()[1]}"
        self.fetches_capped = 0
        self._stop = False
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        self._stop = True
        self._server.close()

    def _accept(self) -> None:
        import socket
        import threading

        while not self._stop:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream, timeout=30)
            inflight: dict[int, tuple[int, int]] = {}
            for fn, a, b in ((self._requests, client, upstream), (self._responses, upstream, client)):
                t = threading.Thread(target=fn, args=(a, b, inflight), daemon=True)
                t.start()
                self._threads.append(t)

    @staticmethod
    def _frames(sock):  # type: ignore[no-untyped-def]
        import struct

        buf = b""
        while True:
            while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
                try:
                    chunk = sock.recv(1 << 20)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
            n = struct.unpack_from(">i", buf)[0]
            yield bytearray(buf[: 4 + n])
            buf = buf[4 + n :]

    def _requests(self, src, dst, inflight) -> None:  # type: ignore[no-untyped-def]
        import struct

        for frame in self._frames(src):
            api_key, api_version, cid = struct.unpack_from(">hhi", frame, 4)
            inflight[cid] = (api_key, api_version)
            try:
                dst.sendall(frame)
            except OSError:
                return

    def _responses(self, src, dst, inflight) -> None:  # type: ignore[no-untyped-def]
        for frame in self._frames(src):
            import struct

            cid = struct.unpack_from(">i", frame, 4)[0]
            kind = inflight.pop(cid, None)
            if kind == (1, 11):
                self._cap_fetch_v11(frame)
            elif kind == (3, 7):
                self._route_metadata_v7(frame)
            elif kind == (3, 12):
                self._route_metadata_v12(frame)
            try:
                dst.sendall(frame)
            except OSError:
                return

    def _route_metadata_v7(self, frame: bytearray) -> None:
        """Advertise the proxy's port instead of the broker's (same host, same frame size)."""
        import struct

        port = int(self.bootstrap.rpartition(":")[2])
        pos = 8 + 4  # size, correlation id, throttle
        (n_brokers,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(n_brokers):
            pos += 4  # node id
            (host_len,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + host_len
            struct.pack_into(">i", frame, pos, port)
            pos += 4
            (rack_len,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(rack_len, 0)

    def _route_metadata_v12(self, frame: bytearray) -> None:
        """The same for Metadata v12 (flexible: compact strings and arrays, tagged fields)."""
        import struct

        def uvarint(pos: int) -> tuple[int, int]:
            value = shift = 0
            while True:
                b = frame[pos]
                pos += 1
                value |= (b & 0x7F) << shift
                if b < 0x80:
                    return value, pos
                shift += 7

        port = int(self.bootstrap.rpartition(":")[2])
        _, pos = uvarint(8)  # after size and correlation id: the header's tagged fields
        pos += 4  # throttle
        n_brokers, pos = uvarint(pos)
        for _ in range(n_brokers - 1):
            pos += 4  # node id
            host_len, pos = uvarint(pos)
            pos += host_len - 1
            struct.pack_into(">i", frame, pos, port)
            pos += 4
            rack_len, pos = uvarint(pos)
            pos += max(rack_len - 1, 0)
            n_tags, pos = uvarint(pos)
            assert n_tags == 0, "tagged fields in a broker entry"

    def _cap_fetch_v11(self, frame: bytearray) -> None:
        import struct

        pos = 8 + 4 + 2 + 4  # size, correlation id, throttle, error, session id
        (n_topics,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        for _ in range(n_topics):
            (name_len,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + name_len
            (n_parts,) = struct.unpack_from(">i", frame, pos)
            pos += 4
            for _ in range(n_parts):
                pos += 4 + 2  # partition, error
                hw, lso = struct.unpack_from(">qq", frame, pos)
                struct.pack_into(">qq", frame, pos, min(hw, self.cap),
                                 min(lso, self.cap) if lso >= 0 else lso)
                self.fetches_capped += 1
                pos += 8 + 8 + 8  # hw, lso, log start
                (n_aborted,) = struct.unpack_from(">i", frame, pos)
                pos += 4 + max(n_aborted, 0) * 16 + 4  # aborted, preferred read replica
                (size,) = struct.unpack_from(">i", frame, pos)
                pos += 4 + max(size, 0)
