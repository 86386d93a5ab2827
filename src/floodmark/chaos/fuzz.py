"""A wire fuzzer: malformed Kafka requests for every API a broker advertises, while a
well-behaved client keeps producing (acks=all, idempotent) and consuming.

Frames are built from the broker's own ApiVersions answer: for every (api key, version) a random
but well-formed request is generated from kio's schema and encoded, then one of the mutations
below is applied. Each frame goes over a raw socket; the broker may answer or close that
connection, nothing else. At the end the broker process must be alive, every record the
well-behaved producer was told is written must be read back at its offset, and the broker's
memory must not have grown without bound.

Mutations: ``valid`` (as generated), ``truncate`` (cut the body), ``flip`` (bit flips),
``overwrite`` (random bytes at random places), ``huge`` (0x7fffffff or a 4-byte varint planted
at a random position: counts and lengths far larger than the frame), ``random-body`` (a valid
header, random bytes after it), ``random`` (random bytes, random size prefix), ``size-lie`` (a
size prefix larger than what follows, then the connection is closed) and ``slow`` (a valid
frame trickled a few bytes at a time). Deterministic for a seed; bounded by frame count and time.

The first frames sweep every (api key, version, mutation) once, in a seeded order, then the
choice is random: a run of at least ``len(apis) * len(MUTATIONS)`` frames has sent every
mutation of every advertised version (the report's ``unswept`` lists what a shorter run left
out), so a short run covers what a long one does, once.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from floodmark.address import parse_bootstrap
from floodmark.chaos.readback import read_partition
from floodmark.client import encode_request
from floodmark.records import simple_batch
from floodmark.security import ClientSecurity

MUTATIONS = ("valid", "truncate", "flip", "overwrite", "huge", "random-body", "random",
             "size-lie", "slow")
API_VERSIONS_KEY = 18


@dataclasses.dataclass(frozen=True, slots=True)
class FuzzConfig:
    bootstrap: str
    frames: int = 10_000
    time_limit_s: float = 60.0
    seed: int = 1
    broker_pid: int | None = None  # for liveness and RSS; None: liveness by connecting
    well_behaved_client: bool = True
    topic: str = "fuzz-bystander"
    connections: int = 8  # frames in flight at once (each sender thread has its own rng)
    # librdkafka-named client properties (``--command-config``): the raw frames go over TLS when
    # the listener is SSL/SASL_SSL (they are sent before any SASL login, so on a SASL listener
    # they exercise the broker's pre-authentication rules and the SASL exchange itself); the
    # set-up requests, the bystander producer and the read-back log in with them.
    client_properties: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def security(self) -> ClientSecurity:
        return ClientSecurity.from_properties(self.client_properties)


@dataclasses.dataclass(slots=True)
class FuzzReport:
    frames: int = 0
    by_mutation: dict[str, int] = dataclasses.field(default_factory=dict)
    answered: int = 0
    closed: int = 0
    apis: int = 0
    elapsed_s: float = 0.0
    broker_alive: bool = True
    acknowledged: int = 0
    lost: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    client_errors: list[str] = dataclasses.field(default_factory=list)
    rss_before_kb: int = -1
    rss_after_kb: int = -1
    rss_samples_kb: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    # (api key, version, mutation) combinations the sweep had not reached when the run ended
    unswept: list[tuple[int, int, str]] = dataclasses.field(default_factory=list)

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.broker_alive and not self.lost and not self.client_errors

    def as_json(self) -> dict[str, Any]:
        return {"frames": self.frames, "frames_per_s": round(self.frames_per_s, 1),
                "by_mutation": self.by_mutation, "answered": self.answered,
                "closed": self.closed, "apis": self.apis, "elapsed_s": round(self.elapsed_s, 2),
                "broker_alive": self.broker_alive, "acknowledged": self.acknowledged,
                "lost": [list(x) for x in self.lost[:20]], "lost_count": len(self.lost),
                "client_errors": self.client_errors[:20], "rss_before_kb": self.rss_before_kb,
                "rss_after_kb": self.rss_after_kb,
                "rss_samples_kb": [list(x) for x in self.rss_samples_kb],
                "unswept": len(self.unswept), "ok": self.ok}


# -- random well-formed requests from kio's schema --------------------------------------------
_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_UINT_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def _small_int(rng: random.Random, bits: int, signed: bool = True) -> int:
    choice = rng.random()
    if choice < 0.6:
        value = rng.randint(-1 if signed else 0, 5)
    elif choice < 0.9:
        value = rng.randint(-(2 ** (bits - 1)) if signed else 0, 2**bits - 1 if not signed
                            else 2 ** (bits - 1) - 1)
    else:
        value = (2 ** (bits - 1) - 1) if signed else 2**bits - 1
    return value


def _string(rng: random.Random) -> str:
    choice = rng.random()
    if choice < 0.5:
        return rng.choice(["fuzz", "__consumer_offsets", "t", "group-1", ""])
    return "".join(rng.choice("abcxyz-_.é0123") for _ in range(rng.randint(0, 24)))


def _primitive(kafka_type: str, field_type: Any, rng: random.Random) -> Any:
    if kafka_type in _INT_RANGES:
        return field_type(_small_int(rng, _INT_RANGES[kafka_type] + 1))
    if kafka_type in _UINT_BITS:
        return field_type(_small_int(rng, _UINT_BITS[kafka_type], signed=False))
    if kafka_type == "float64":
        return field_type(rng.random())
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "string":
        return _string(rng)
    if kafka_type == "bytes":
        return os.urandom(rng.randint(0, 16)) if rng.random() < 0.5 else b""
    if kafka_type == "records":
        if rng.random() < 0.7:
            return field_type(simple_batch([b"fuzz-%d" % rng.randint(0, 999)]))
        return field_type(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 80))))
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128)) if rng.random() < 0.5 else uuid.UUID(int=0)
    if kafka_type == "error_code":
        from kio.schema.errors import ErrorCode as KioErrorCode

        return KioErrorCode.none
    if kafka_type.startswith("timedelta"):
        return field_type(datetime.timedelta(milliseconds=rng.randint(0, 60_000)))
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(rng.randint(0, 2_000_000_000), tz=datetime.UTC)
    raise ValueError(f"no generator for {kafka_type}")


def random_entity(cls: type, rng: random.Random, depth: int = 0) -> Any:
    """A random, well-formed instance of kio entity ``cls``."""
    kwargs: dict[str, Any] = {}
    hints = _hints(cls)
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is not None and rng.random() < 0.7:
            continue  # leave the tagged field at its default
        optional = is_optional(field)
        if optional and rng.random() < 0.15:
            kwargs[field.name] = None
            continue
        kafka_type = field.metadata.get("kafka_type", "")
        resolved: Any = field
        if isinstance(field.type, str):
            resolved = dataclasses.replace(resolved, type=hints[field.name])
        shape = classify_field(resolved)
        count = 0 if depth > 3 else rng.choice([0, 1, 1, 2, 3])
        if isinstance(shape, PrimitiveField):
            kwargs[field.name] = _primitive(kafka_type, shape.type_, rng)
        elif isinstance(shape, PrimitiveTupleField):
            kwargs[field.name] = tuple(_primitive(kafka_type, shape.type_, rng)
                                       for _ in range(count))
        elif isinstance(shape, EntityField):
            kwargs[field.name] = random_entity(shape.type_, rng, depth + 1)
        elif isinstance(shape, EntityTupleField):
            kwargs[field.name] = tuple(random_entity(shape.type_, rng, depth + 1)
                                       for _ in range(count))
    return cls(**kwargs)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        import typing

        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


# -- mutations ----------------------------------------------------------------------------------
def mutate(frame: bytes, mutation: str, rng: random.Random) -> bytes:
    body = bytearray(frame[4:])
    if mutation == "truncate" and len(body) > 8:
        body = body[:rng.randint(8, len(body) - 1)]
    elif mutation == "flip":
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(body))
            body[at] ^= 1 << rng.randrange(8)
    elif mutation == "overwrite":
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(8, max(9, len(body)))
            chunk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4)))
            body[at:at + len(chunk)] = chunk
    elif mutation == "huge":
        at = rng.randrange(8, max(9, len(body)))
        patch = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x7f\xff",
                            b"\xff\xff\xff\xff\x0f"])
        body[at:at + len(patch)] = patch
    elif mutation == "random-body":
        body = body[:8] + bytearray(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
    elif mutation == "random":
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
    return struct.pack(">i", len(body)) + bytes(body)


# -- the run ------------------------------------------------------------------------------------
def _address(bootstrap: str) -> tuple[str, int]:
    return parse_bootstrap(bootstrap)[0]


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


def advertised_versions(bootstrap: str,
                        security: ClientSecurity | None = None) -> list[tuple[int, int]]:
    from floodmark.client import KafkaConnection

    with KafkaConnection(bootstrap, timeout_s=30,
                         security=security or ClientSecurity()) as conn:
        resp = conn.request(API_VERSIONS_KEY, 3, {"client_software_name": "fuzz",
                                                  "client_software_version": "1"})
    out = []
    for api in resp.api_keys:
        for version in range(int(api.min_version), int(api.max_version) + 1):
            try:
                load_request_schema(int(api.api_key), version)
            except Exception:  # a version kio has no schema for: skip it
                continue
            out.append((int(api.api_key), version))
    return out


class _Sender:
    """One raw connection, reopened whenever the broker closes it."""

    def __init__(self, address: tuple[str, int], security: ClientSecurity | None = None) -> None:
        self.address = address
        self.sock: socket.socket | None = None
        self.context = None if security is None else security.ssl_context()
        self.server_hostname = (None if security is None
                                else security.server_hostname(address[0]))

    def _open(self) -> socket.socket:
        if self.sock is None:
            sock = socket.create_connection(self.address, timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:  # the TLS handshake first, then the raw frames
                sock = self.context.wrap_socket(sock, server_hostname=self.server_hostname)
            self.sock = sock
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, data: bytes, *, slow: bool, expect_answer: bool,
                 rng: random.Random) -> bool:
        """Send; True if the broker answered, False if it closed the connection. A frame that
        is not expected to be answered goes on a connection of its own whose write side is
        then shut, so the broker sees the end of the stream at once instead of waiting."""
        if not expect_answer:
            self.close()
        sock = self._open()
        try:
            if slow:
                pos = 0
                while pos < len(data):
                    step = rng.randint(1, 7)
                    sock.sendall(data[pos:pos + step])
                    pos += step
                    time.sleep(0.001)
            else:
                sock.sendall(data)
            if not expect_answer:
                sock.shutdown(socket.SHUT_WR)
            sock.settimeout(10.0)
            head = sock.recv(4)
            if not head:
                self.close()
                return False
            size = struct.unpack(">i", head.ljust(4, b"\0"))[0]
            remaining = size - (len(head) - 4)
            while remaining > 0:
                chunk = sock.recv(min(remaining, 1 << 16))
                if not chunk:
                    break
                remaining -= len(chunk)
            if not expect_answer:
                self.close()
            return True
        except (TimeoutError, ConnectionError, OSError):
            self.close()
            return False


def _bystander(bootstrap: str, topic: str, stop: threading.Event,
               acked: dict[str, int], errors: list[str],
               client_properties: dict[str, str]) -> threading.Thread:
    """A well-behaved confluent-kafka producer (acks=all, idempotent), bounded in count."""

    def run() -> None:
        from confluent_kafka import Producer

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked[msg.value().decode()] = msg.offset()
            else:
                errors.append(str(err))

        producer = Producer({**client_properties, "bootstrap.servers": bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 60_000})
        i = 0
        while not stop.is_set() and i < 200_000:
            producer.produce(topic, value=f"b{i:07d}".encode(), partition=0,
                             on_delivery=on_delivery)
            i += 1
            producer.poll(0.01)
        left = producer.flush(60)
        if left:
            errors.append(f"{left} message(s) not delivered after flush")

    thread = threading.Thread(target=run, name="fuzz-bystander", daemon=True)
    thread.start()
    return thread


def _create_topic(bootstrap: str, topic: str, security: ClientSecurity) -> None:
    from floodmark.client import KafkaConnection

    with KafkaConnection(bootstrap, timeout_s=30, security=security) as conn:
        conn.request(19, 4, {"topics": [{"name": topic, "num_partitions": 1,
                                         "replication_factor": -1}], "timeout": 10_000})


def run_fuzz(config: FuzzConfig,
             progress: Callable[[FuzzReport], None] | None = None) -> FuzzReport:
    report = FuzzReport()
    address = _address(config.bootstrap)
    security = config.security
    apis = advertised_versions(config.bootstrap, security)
    report.apis = len(apis)
    if config.broker_pid is not None:
        report.rss_before_kb = rss_kb(config.broker_pid)
    stop = threading.Event()
    acked: dict[str, int] = {}
    thread = None
    if config.well_behaved_client:
        _create_topic(config.bootstrap, config.topic, security)
        thread = _bystander(config.bootstrap, config.topic, stop, acked, report.client_errors,
                            config.client_properties)
    started = time.monotonic()
    lock = threading.Lock()
    # The broker's memory at every quarter of the frames (frames sent so far, kB): flat or not.
    sample_every = max(1, config.frames // 4)
    # every (api, version, mutation) once first, in a seeded order; taken from the end
    sweep = [(key, version, mutation) for key, version in apis for mutation in MUTATIONS]
    random.Random(config.seed).shuffle(sweep)
    sweep.reverse()

    def send_frames(worker: int) -> None:
        wrng = random.Random(config.seed * 1000 + worker)
        sender = _Sender(address, security if security.uses_tls else None)
        correlation_id = 0
        try:
            while time.monotonic() - started < config.time_limit_s:
                with lock:
                    if report.frames >= config.frames:
                        return
                    report.frames += 1
                    if config.broker_pid is not None and report.frames % sample_every == 0:
                        report.rss_samples_kb.append((report.frames,
                                                      rss_kb(config.broker_pid)))
                    swept = sweep.pop() if sweep else None
                if swept is not None:
                    key, version, mutation = swept
                else:
                    key, version = wrng.choice(apis)
                    mutation = wrng.choice(MUTATIONS)
                correlation_id += 1
                try:
                    body = random_entity(load_request_schema(key, version), wrng)
                    frame = encode_request(key, version, correlation_id, body, "fuzz")
                except Exception:  # kio refused a generated value: send it valid-but-empty
                    continue
                data = frame if mutation in ("valid", "slow") else mutate(frame, mutation, wrng)
                if mutation == "size-lie":
                    data = struct.pack(">i", len(data) + wrng.randint(1, 1000)) + data[4:]
                answered = sender.exchange(data, slow=mutation == "slow",
                                           expect_answer=mutation in ("valid", "slow"),
                                           rng=wrng)
                with lock:
                    report.by_mutation[mutation] = report.by_mutation.get(mutation, 0) + 1
                    if answered:
                        report.answered += 1
                    else:
                        report.closed += 1
                    if progress is not None and report.frames % 1000 == 0:
                        report.elapsed_s = time.monotonic() - started
                        progress(report)
        finally:
            sender.close()

    workers = [threading.Thread(target=send_frames, args=(i,), name=f"fuzz-{i}", daemon=True)
               for i in range(max(1, config.connections))]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(config.time_limit_s + 30)
    finally:
        report.elapsed_s = time.monotonic() - started
        report.unswept = sorted(sweep)
        stop.set()
        if thread is not None:
            thread.join(120)
    if config.broker_pid is not None:
        report.broker_alive = pid_alive(config.broker_pid)
        report.rss_after_kb = rss_kb(config.broker_pid)
    else:
        try:
            socket.create_connection(address, timeout=5).close()
        except OSError:
            report.broker_alive = False
    if config.well_behaved_client and report.broker_alive:
        report.acknowledged = len(acked)
        values = read_partition(config.bootstrap, config.topic,
                                client_properties=config.client_properties)
        report.lost = sorted((o, v) for v, o in acked.items() if values.get(o) != v.encode())
    return report
