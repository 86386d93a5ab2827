"""SASL/OAUTHBEARER on a real broker process with real clients: the broker trusts a JSON Web Key
Set file (``sasl.oauthbearer.jwks.endpoint.url``), the test plays the identity provider (RSA and
EC keys, signed JWTs handed to the clients' token callbacks).

confluent-kafka (``oauth_cb``) and kafka-python (``sasl_oauth_token_provider``) produce and
consume as the token's subject; a forged token (another key under the same ``kid``) and an
unsecured token (librdkafka's ``enable.sasl.oauthbearer.unsecure.jwt``) are refused with
SASL_AUTHENTICATION_FAILED and write nothing; a key rotated into the file is trusted without a
restart; and with ``connections.max.reauth.ms`` a producer whose tokens live 4 s keeps being
acknowledged across several token refreshes (KIP-368 re-authentication)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from floodmark.client.connection import KafkaConnection
from tests.compat.test_sasl import SaslBroker
from tests.conftest import BrokerProcess
from tests.jwt_keys import SigningKey, claims, jwks

pytestmark = pytest.mark.compat

KEY = SigningKey.rsa("idp-2026")
EC_KEY = SigningKey.ec("idp-ec")
FORGER = SigningKey.rsa("idp-2026")
AUDIENCE = "floodmark"


class Idp:
    """Hands out tokens signed by ``key`` and counts them."""

    def __init__(self, key: SigningKey, sub: str, lifetime_s: float = 300) -> None:
        self.key, self.sub, self.lifetime_s = key, sub, lifetime_s
        self.issued = 0

    def token(self) -> tuple[str, float]:
        self.issued += 1
        c = claims(self.sub, self.lifetime_s, aud=AUDIENCE)
        return self.key.token(c), float(c["exp"])

    def oauth_cb(self, _config: str) -> tuple[str, float]:
        return self.token()


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SaslBroker, Path]]:
    tmp = tmp_path_factory.mktemp("oauth")
    key_set = tmp / "jwks.json"
    key_set.write_text(jwks(KEY))
    b = BrokerProcess(tmp / "data", [
        "--set", "listeners=PLAINTEXT://127.0.0.1:0,SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
        "--set", "sasl.enabled.mechanisms=OAUTHBEARER",
        "--set", f"sasl.oauthbearer.jwks.endpoint.url=file://{key_set}",
        "--set", f"sasl.oauthbearer.expected.audience={AUDIENCE}",
        "--set", "connections.max.reauth.ms=60000",
        "--set", "connection.failed.authentication.delay.ms=200"]).start()
    yield SaslBroker(b), key_set
    b.stop()


def _conf(broker: SaslBroker, idp: Idp, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": idp.oauth_cb, **extra}


def _read(conf: dict[str, Any], topic: str, n: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got


def _topic_exists(broker: SaslBroker, topic: str) -> bool:
    with KafkaConnection(broker.plaintext) as conn:
        meta = conn.request(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                    "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
    return int(meta.topics[0].error_code) == 0


def test_confluent_kafka_produces_and_consumes_with_signed_tokens(
        oauth_broker: tuple[SaslBroker, Path]) -> None:
    broker, _ = oauth_broker
    idp = Idp(KEY, "svc-orders")
    producer = Producer({**_conf(broker, idp), "acks": "all"})
    for i in range(5):
        producer.produce("oauth-ck", value=f"v{i}".encode())
    assert producer.flush(30) == 0
    assert _read(_conf(broker, idp), "oauth-ck", 5) == [f"v{i}".encode() for i in range(5)]


def test_kafka_python_produces_with_a_token_provider(
        oauth_broker: tuple[SaslBroker, Path]) -> None:
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    idp = Idp(KEY, "svc-python")

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return idp.token()[0]

    broker, _ = oauth_broker
    producer = KafkaProducer(bootstrap_servers=broker.sasl, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider(),
                             acks="all")
    try:
        assert producer.send("oauth-kp", b"hello").get(timeout=30).offset == 0
    finally:
        producer.close()


@pytest.mark.parametrize("case", ["forged", "unsecured", "wrong-audience"])
def test_bad_tokens_are_refused_and_write_nothing(oauth_broker: tuple[SaslBroker, Path],
                                                  case: str) -> None:
    broker, _ = oauth_broker
    topic = f"oauth-refused-{case}"
    errors: list[KafkaError] = []
    base = {"bootstrap.servers": broker.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "error_cb": errors.append,
            "message.timeout.ms": 3000}
    if case == "unsecured":
        conf = {**base, "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=admin"}
    elif case == "forged":
        conf = {**base, "oauth_cb": Idp(FORGER, "admin").oauth_cb}
    else:
        def other_audience(_config: str) -> tuple[str, float]:
            c = claims("admin", aud="someone-else")
            return KEY.token(c), float(c["exp"])
        conf = {**base, "oauth_cb": other_audience}
    producer = Producer(conf)
    producer.produce(topic, value=b"must not land")
    producer.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert not _topic_exists(broker, topic)
    why = {"forged": "signature does not verify", "unsecured": "unsecured tokens",
           "wrong-audience": "audience"}[case]
    assert why in broker.b.log_text()


def test_a_rotated_key_is_trusted_without_a_restart(
        oauth_broker: tuple[SaslBroker, Path]) -> None:
    broker, key_set = oauth_broker
    idp = Idp(EC_KEY, "svc-rotated")
    errors: list[KafkaError] = []
    producer = Producer({**_conf(broker, idp), "error_cb": errors.append,
                         "message.timeout.ms": 3000})
    producer.produce("oauth-rotated", value=b"before")
    producer.flush(10)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    key_set.write_text(jwks(KEY, EC_KEY))  # the provider publishes its new key
    producer = Producer({**_conf(broker, idp), "acks": "all"})
    producer.produce("oauth-rotated", value=b"after")
    assert producer.flush(30) == 0
    assert _read(_conf(broker, idp), "oauth-rotated", 1) == [b"after"]


def test_short_lived_tokens_are_refreshed_and_the_session_reauthenticates(
        oauth_broker: tuple[SaslBroker, Path]) -> None:
    """Tokens live 4 s; the broker's session ends with the token (connections.max.reauth.ms is
    a minute), so the producer is acknowledged across refreshes only if it re-authenticates
    (or reconnects with a fresh token)."""
    broker, _ = oauth_broker
    idp = Idp(KEY, "svc-short", lifetime_s=4)
    acked: list[int] = []
    producer = Producer({**_conf(broker, idp), "acks": "all",
                         "on_delivery": lambda err, msg: err is None and acked.append(1)})
    deadline = time.monotonic() + 60  # bounds the loop; progress is what it waits on
    last_progress = time.monotonic()
    seen = 0
    while idp.issued < 4 and time.monotonic() < deadline:
        producer.produce("oauth-short", value=b"x")
        producer.poll(0.2)
        if len(acked) > seen:
            seen, last_progress = len(acked), time.monotonic()
        assert time.monotonic() - last_progress < 15, (
            f"no acknowledgement for 15 s (tokens issued {idp.issued}, acked {len(acked)})")
    assert producer.flush(30) == 0
    assert idp.issued >= 4, "the client never refreshed its token"
    # A connection librdkafka leaves idle (its bootstrap one) may not re-authenticate: the
    # broker closes it at its next request once the token's session ended, and the client
    # connects again with a fresh token. The producer's acknowledgements never stopped.


def test_floodmarks_own_cli_logs_in_with_a_token_file_and_a_token_endpoint(
        oauth_broker: tuple[SaslBroker, Path], tmp_path: Path) -> None:
    """floodmark's own client (every CLI command's ``--command-config``) speaks OAUTHBEARER:
    the token from ``sasl.oauthbearer.token.endpoint.url`` as a ``file://`` URL, or from a token
    endpoint by the client-credentials grant (a local one here, playing the identity provider);
    a forged token is refused in one line."""
    import http.server
    import json
    import subprocess
    import sys
    import threading
    import urllib.parse

    broker, _ = oauth_broker
    idp = Idp(KEY, "cli-user")

    def run(props: dict[str, str]) -> subprocess.CompletedProcess[str]:
        config = tmp_path / "client.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return subprocess.run([sys.executable, "-m", "floodmark.cli", "topic", "list", "--json",
                               "--bootstrap-server", broker.sasl, "--command-config",
                               str(config)], capture_output=True, text=True, timeout=60)

    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER"}
    token_file = tmp_path / "token"
    token_file.write_text(idp.token()[0] + "\n")
    done = run({**base, "sasl.oauthbearer.token.endpoint.url": f"file://{token_file}"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr

    seen: list[dict[str, list[str]]] = []

    class TokenEndpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = urllib.parse.parse_qs(
                self.rfile.read(int(self.headers["Content-Length"])).decode())
            seen.append({**form, "authorization": [self.headers.get("Authorization", "")]})
            body = json.dumps({"access_token": idp.token()[0], "token_type": "bearer",
                               "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), TokenEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done = run({**base, "sasl.oauthbearer.token.endpoint.url":
                    f"http://127.0.0.1:{server.server_port}/token",
                    "sasl.oauthbearer.client.id": "cli", "sasl.oauthbearer.client.secret": "s3",
                    "sasl.oauthbearer.scope": "kafka"})
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert seen and seen[0]["grant_type"] == ["client_credentials"]
    assert seen[0]["scope"] == ["kafka"] and seen[0]["authorization"][0].startswith("Basic ")

    token_file.write_text(FORGER.token(claims("cli-user", 300, aud=AUDIENCE)))
    done = run({**base, "sasl.oauthbearer.token.endpoint.url": f"file://{token_file}"})
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "SASL_AUTHENTICATION_FAILED" in lines[0], done.stderr
    assert "s3" not in done.stderr and FORGER.token(claims("x", 1)) not in done.stderr
