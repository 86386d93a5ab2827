"""Real clients over TLS: a broker process with an SSL listener beside a PLAINTEXT one;
confluent-kafka (librdkafka), kafka-python and aiokafka produce and consume over SSL, each
told only the SSL listener, and Metadata keeps them on it."""

from __future__ import annotations

import asyncio
import re
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.tls_pki import Pki, make_pki

RECORDS = 50


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(PLAINTEXT bootstrap, SSL bootstrap)."""
    b = BrokerProcess(tmp_path_factory.mktemp("tls") / "data", [
        "--set", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "--set", "ssl.keystore.type=PEM",
        "--set", f"ssl.keystore.location={pki.broker.keystore}",
        "--set", f"ssl.truststore.location={pki.ca}",
        "--set", "ssl.client.auth=requested",
    ]).start()
    assert b.proc is not None and b.proc.stdout is not None
    ssl_port = None
    while ssl_port is None:
        m = re.search(r"listener SSL \(SSL\) at \S+:(\d+)", b.proc.stdout.readline().decode())
        ssl_port = int(m.group(1)) if m else None
    yield b.bootstrap, f"127.0.0.1:{ssl_port}"
    assert "Traceback" not in b.log_text()
    b.stop()


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


def test_confluent_kafka_over_ssl(tls_broker: tuple[str, str], pki: Pki) -> None:
    from confluent_kafka import Consumer, Producer

    _, bootstrap = tls_broker
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "ssl",
            "ssl.ca.location": str(pki.ca)}
    topic = _topic()
    p = Producer({**conf, "acks": "all"})
    for i in range(RECORDS):
        p.produce(topic, value=b"x" * 1024, key=str(i).encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest",
                  # mTLS too: a client certificate on a listener that requests one
                  "ssl.certificate.location": str(pki.alice.cert),
                  "ssl.key.location": str(pki.alice.key)})
    c.subscribe([topic])
    got = []
    while len(got) < RECORDS:
        msg = c.poll(30)
        assert msg is not None, f"consumed {len(got)} of {RECORDS}"
        assert msg.error() is None, msg.error()
        got.append(msg.key())
    c.close()
    assert got == [str(i).encode() for i in range(RECORDS)]


def test_kafka_python_over_ssl(tls_broker: tuple[str, str], pki: Pki) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    _, bootstrap = tls_broker
    conf = {"bootstrap_servers": bootstrap, "security_protocol": "SSL",
            "ssl_cafile": str(pki.ca)}
    topic = _topic()
    producer = KafkaProducer(acks="all", **conf)
    for i in range(RECORDS):
        producer.send(topic, key=str(i).encode(), value=b"y" * 1024)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20_000,
                             ssl_certfile=str(pki.alice.cert), ssl_keyfile=str(pki.alice.key),
                             **conf)
    keys = [m.key for _, m in zip(range(RECORDS), consumer, strict=False)]
    consumer.close()
    assert keys == [str(i).encode() for i in range(RECORDS)]


def test_aiokafka_over_ssl(tls_broker: tuple[str, str], pki: Pki) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    _, bootstrap = tls_broker
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    topic = _topic()

    async def run() -> list[bytes | None]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                    ssl_context=ctx, acks="all")
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send(topic, key=str(i).encode(), value=b"z")
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                    security_protocol="SSL", ssl_context=ctx,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            keys: list[bytes | None] = []
            while len(keys) < RECORDS:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for records in batch.values():
                    keys.extend(r.key for r in records)
            return keys
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [str(i).encode() for i in range(RECORDS)]


def test_the_plaintext_listener_is_served_beside(tls_broker: tuple[str, str],
                                                 tmp_path: Path) -> None:
    from confluent_kafka import Producer

    plain, _ = tls_broker
    p = Producer({"bootstrap.servers": plain})
    p.produce(_topic(), value=b"plain")
    assert p.flush(30) == 0
