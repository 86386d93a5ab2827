"""Bad input gets a clear error or a closed connection for that client only; others are served."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pytest

from floodmark.client import KafkaConnection
from floodmark.client.connection import encode_request
from floodmark.errors import ErrorCode
from floodmark.records import ATTRIBUTES_POS, CRC_POS, crc32c_of, simple_batch

# serial: a fixture checks that a background client kept being served (a count of its
# requests while the test ran), which other workers starving the CPU would bend
pytestmark = [pytest.mark.integration, pytest.mark.serial]

TOPIC = "bad-input"


def _closed_by_broker(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _raw(broker) -> socket.socket:
    host, port = broker.bootstrap.split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _produce(conn: KafkaConnection, records: bytes, topic: str = TOPIC, acks: int = -1,
             transactional_id: str | None = None):
    resp = conn.request(0, 9, {"transactional_id": transactional_id, "acks": acks,
                               "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def _latest(conn: KafkaConnection, topic: str = TOPIC) -> int:
    resp = conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                         "timestamp": -1}]}]})
    return int(resp.topics[0].partitions[0].offset)


@pytest.fixture(scope="module")
def bystander(broker):
    """A well-behaved client that keeps one connection open across all the abuse, plus a
    background client that produces and reads back continuously while the abuse happens."""
    conn = KafkaConnection(broker.bootstrap)
    resp = conn.request(19, 7, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                             "replication_factor": 1},
                                            {"name": "bystander-bg", "num_partitions": 1,
                                             "replication_factor": 1}], "timeout": 5000})
    assert all(t.error_code == 0 for t in resp.topics)
    stop = threading.Event()
    progress: list[int] = []
    errors: list[BaseException] = []

    def background() -> None:
        try:
            with KafkaConnection(broker.bootstrap) as bg:
                while not stop.is_set():
                    p = _produce(bg, simple_batch([b"bg-%d" % len(progress)]), topic="bystander-bg")
                    assert p.error_code == 0, p
                    assert _latest(bg, "bystander-bg") == p.base_offset + 1
                    progress.append(p.base_offset)
                    time.sleep(0.005)
        except BaseException as exc:  # reported by the fixture teardown
            errors.append(exc)

    thread = threading.Thread(target=background, daemon=True)
    thread.start()
    yield conn
    stop.set()
    thread.join(10)
    conn.close()
    assert not errors, errors
    assert len(progress) > 20, "the background client was starved"
    assert progress == list(range(len(progress)))  # every produce landed, in order


def _still_served(broker, bystander: KafkaConnection) -> None:
    before = _latest(bystander)
    p = _produce(bystander, simple_batch([b"still-here"]))
    assert p.error_code == 0 and p.base_offset == before
    assert _latest(bystander) == before + 1
    assert broker.alive()


def test_random_bytes_close_only_that_connection(broker, bystander) -> None:
    rng = random.Random(1234)
    for _ in range(5):
        s = _raw(broker)
        s.sendall(bytes(rng.randrange(256) for _ in range(4096)))
        s.shutdown(socket.SHUT_WR)
        assert _closed_by_broker(s)
        s.close()
        _still_served(broker, bystander)


def test_garbage_inside_a_valid_size_prefix(broker, bystander) -> None:
    s = _raw(broker)
    body = struct.pack(">hhi", 3, 12, 7) + os.urandom(64)  # Metadata v12 header, junk after
    s.sendall(struct.pack(">i", len(body)) + body)
    assert _closed_by_broker(s)
    _still_served(broker, bystander)


def test_truncated_frame(broker, bystander) -> None:
    frame = encode_request(3, 12, 1, {"topics": None, "allow_auto_topic_creation": False})
    s = _raw(broker)
    s.sendall(frame[: len(frame) // 2])
    s.shutdown(socket.SHUT_WR)  # the rest never comes
    assert _closed_by_broker(s)
    _still_served(broker, bystander)
    # A size prefix that claims less than the header needs.
    s = _raw(broker)
    s.sendall(struct.pack(">i", 3) + b"abc")
    assert _closed_by_broker(s)


@pytest.mark.parametrize("frame_hex", [
    # Issue 8: counts that kio's native decoder reserved memory for before checking the bytes
    # (57 GB), aborting the process with SIGABRT.
    "0000001b000a00061f55d2b300047266757a007fffffffcd1ab591b64cfee1",  # FindCoordinator v6
    "00000025002000043459cf0000047266757a00ddb4bca70d53de4c7d61a801e0cf143affca216ea66d",
])
def test_counts_larger_than_the_frame_close_only_that_connection(broker, bystander,
                                                                   frame_hex: str) -> None:
    s = _raw(broker)
    s.sendall(bytes.fromhex(frame_hex))
    assert _closed_by_broker(s)
    s.close()
    assert broker.proc.poll() is None, "the broker process died"
    _still_served(broker, bystander)


def test_size_prefix_above_socket_request_max_bytes(broker, bystander) -> None:
    s = _raw(broker)
    s.sendall(struct.pack(">i", 104_857_600 + 1))  # closed before any body is read
    assert _closed_by_broker(s)
    s = _raw(broker)
    s.sendall(struct.pack(">i", -5))
    assert _closed_by_broker(s)
    _still_served(broker, bystander)


def test_unknown_api_key_closes(broker, bystander) -> None:
    s = _raw(broker)
    body = struct.pack(">hhih", 999, 0, 1, -1)
    s.sendall(struct.pack(">i", len(body)) + body)
    assert _closed_by_broker(s)
    # A real Kafka API floodmark does not serve (UpdateRaftVoter: controller-only, as Kafka) is
    # also refused.
    s = _raw(broker)
    body = struct.pack(">hhih", 82, 0, 1, -1) + b"\x00"  # the header; the body never read
    s.sendall(struct.pack(">i", len(body)) + body)
    assert _closed_by_broker(s)
    _still_served(broker, bystander)


def test_too_new_api_versions_is_answered_in_v0_layout(broker, bystander) -> None:
    s = _raw(broker)
    body = struct.pack(">hhih", 18, 77, 42, -1) + b"whatever-layout-v77-has"
    s.sendall(struct.pack(">i", len(body)) + body)
    s.settimeout(10)
    size = struct.unpack(">i", s.recv(4))[0]
    data = b""
    while len(data) < size:
        data += s.recv(size - len(data))
    corr, error_code, n = struct.unpack_from(">ihi", data, 0)
    assert corr == 42 and error_code == 35 and n > 10
    keys = {struct.unpack_from(">hhh", data, 10 + 6 * i) for i in range(n)}
    assert (18, 0, 4) in keys
    s.close()


def test_too_new_version_of_other_api_closes(broker, bystander) -> None:
    s = _raw(broker)
    body = struct.pack(">hhih", 3, 13, 1, -1) + b"\0\0\0"  # Metadata v13 is not advertised
    s.sendall(struct.pack(">i", len(body)) + body)
    assert _closed_by_broker(s)
    _still_served(broker, bystander)


def test_bad_crc_is_corrupt_message_and_appends_nothing(broker, bystander) -> None:
    before = _latest(bystander)
    batch = bytearray(simple_batch([b"a", b"b", b"c"]))
    batch[-1] ^= 0xFF  # flip a bit in the last record: the CRC no longer matches
    with KafkaConnection(broker.bootstrap) as conn:
        p = _produce(conn, bytes(batch))
        assert p.error_code == 2  # CORRUPT_MESSAGE
        # The same connection stays usable after an error answer.
        assert _latest(conn) == before
    _still_served(broker, bystander)


def test_produce_to_unknown_topic(broker_factory) -> None:
    b = broker_factory("--set", "auto.create.topics.enable=false")
    with KafkaConnection(b.bootstrap) as conn:
        p = _produce(conn, simple_batch([b"x"]), topic="does-not-exist")
        assert p.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        meta = conn.request(3, 12, {"topics": [{"name": "does-not-exist"}],
                                    "allow_auto_topic_creation": True})
        assert meta.topics[0].error_code == 3


def test_fetch_beyond_log_end(broker, bystander) -> None:
    leo = _latest(bystander)
    resp = bystander.request(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
            {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                             "fetch_offset": leo + 100, "last_fetched_epoch": -1,
                                             "log_start_offset": -1,
                                             "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    part = resp.responses[0].partitions[0]
    assert part.error_code == 1  # OFFSET_OUT_OF_RANGE
    assert part.log_start_offset == 0 and part.high_watermark == leo
    _still_served(broker, bystander)


def test_acks_zero_gets_no_response_and_next_request_is_fine(broker, bystander) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        before = _latest(conn)
        conn.send(0, 9, {"acks": 0, "timeout": 5000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": simple_batch([b"z"])}]}]})
        assert _latest(conn) == before + 1  # the next response is ListOffsets', not Produce's


def test_no_handler_crashed(broker) -> None:
    """Every bad input above was refused on purpose, never by a handler blowing up."""
    text = broker.log_text()
    assert "Traceback" not in text and "handler failed" not in text


def _with_attributes(attributes: int) -> bytes:
    """A well-framed batch with a good CRC but the given attributes (e.g. an unknown codec)."""
    batch = bytearray(simple_batch([b"ok", b"ok"]))
    struct.pack_into(">h", batch, ATTRIBUTES_POS, attributes)
    struct.pack_into(">I", batch, CRC_POS, crc32c_of(memoryview(batch)[ATTRIBUTES_POS:]))
    return bytes(batch)


@pytest.mark.parametrize(("records", "transactional_id"), [
    (b"\x00" * 10, None), (bytes(range(200)), None), (b"\xff" * 61, None),
    (simple_batch([b"ok"])[:-3], None),
    # codec ids 5-7 do not exist; with and without the control bit (a fuzzer found the
    # handler raising); a transactional batch goes with a transactional id, without which the
    # request is refused before its records are looked at (the test below)
    (_with_attributes(0x05), None), (_with_attributes(0x07), None),
    (_with_attributes(0x20 | 0x06), None), (_with_attributes(0x30 | 0x07), "bad-input")],
    ids=["zeros", "range", "ff", "truncated", "codec5", "codec7", "control-codec6",
         "txn-control-codec7"])
def test_garbage_records_are_corrupt_message(broker, bystander, records: bytes,
                                             transactional_id: str | None) -> None:
    before = _latest(bystander)
    with KafkaConnection(broker.bootstrap) as conn:
        p = _produce(conn, records, transactional_id=transactional_id)
        assert p.error_code in (2, 87)  # CORRUPT_MESSAGE (or INVALID_RECORD)
        assert _latest(conn) == before
    _still_served(broker, bystander)


def test_transactional_records_without_a_transactional_id(broker, bystander) -> None:
    """Kafka's first check of a Produce: transactional records (the first batch's attribute,
    however malformed the rest) with no transactional id refuse the request,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing appended."""
    before = _latest(bystander)
    with KafkaConnection(broker.bootstrap) as conn:
        p = _produce(conn, _with_attributes(0x30 | 0x07))
        assert (p.error_code, p.base_offset) == (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                                 -1)
        assert _latest(conn) == before
    _still_served(broker, bystander)


def test_pipelined_requests_are_answered_in_order_under_backpressure(broker, bystander) -> None:
    """500 requests sent without reading (long-polls mixed in): the broker pauses reading when
    its queue fills, keeps serving others, and answers everything in request order."""
    conn = KafkaConnection(broker.bootstrap)
    leo = _latest(bystander)
    sent = []
    for i in range(500):
        if i % 50 == 0:  # a fetch that waits 300 ms for data that never comes
            body = {"replica_id": -1, "max_wait": 300, "min_bytes": 1 << 20, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                         "fetch_offset": leo,
                                                         "last_fetched_epoch": -1,
                                                         "log_start_offset": -1,
                                                         "partition_max_bytes": 1 << 20}]}],
                    "forgotten_topics_data": [], "rack_id": ""}
            sent.append((1, 12, conn.send(1, 12, body)))
        else:
            sent.append((3, 12, conn.send(3, 12, {"topics": [{"name": TOPIC}],
                                                  "allow_auto_topic_creation": False})))
    _still_served(broker, bystander)
    for key, version, corr in sent:  # receive() checks each correlation id in turn
        conn.receive(key, version, corr)
    conn.close()
