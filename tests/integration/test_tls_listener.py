"""A broker with an SSL listener beside a PLAINTEXT one, in this process (real sockets, real TLS):
the mTLS principal reaches the connection, bad peers are one log line each and closed while the
others are served, and a rotated key store is served to new connections without a restart."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.client.connection import KafkaConnection, RequestFailed, encode_request
from floodmark.security import certs
from floodmark.security.client_security import ClientSecurity
from floodmark.security.principal import KafkaPrincipal
from tests.tls_pki import Pki, make_pki

API_VERSIONS = 18


class RunningBroker:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30), "broker did not start"

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            await self.broker.serve(lambda _port: self.ready.set())

        asyncio.run(main())

    def port(self, listener: str) -> int:
        return self.broker.bound_ports[listener]

    def stop(self) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.broker.stop)
        self.thread.join(30)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def running(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    data = tmp_path_factory.mktemp("tls-broker")
    keystore = data / "broker.keystore.pem"
    keystore.write_bytes(pki.broker.keystore.read_bytes())  # this test rotates its own copy
    config = BrokerConfig.load(data_dir=data / "data", listen="127.0.0.1:0", overrides=[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        f"ssl.truststore.location={pki.ca}",
        "ssl.client.auth=required",
        "ssl.principal.mapping.rules=RULE:^CN=([^,]+),O=floodmark$/$1/L,DEFAULT",
    ])
    b = Broker(config)
    b.open()
    running = RunningBroker(b)
    yield running
    running.stop()


def client(pki: Pki, who: certs.NodeFiles | None, **extra: str) -> ClientSecurity:
    props = {"security.protocol": "ssl", "ssl.ca.location": str(pki.ca), **extra}
    if who is not None:
        props.update({"ssl.certificate.location": str(who.cert),
                      "ssl.key.location": str(who.key)})
    return ClientSecurity.from_properties(props)


def api_versions(conn: KafkaConnection) -> Any:
    return conn.request(API_VERSIONS, 3, {"client_software_name": "t",
                                          "client_software_version": "1"})


def test_mtls_principal_reaches_the_connection(running: RunningBroker, pki: Pki) -> None:
    with KafkaConnection(f"127.0.0.1:{running.port('SSL')}",
                         security=client(pki, pki.alice)) as conn:
        assert api_versions(conn).error_code == 0
        ssl_conns = [c for c in list(running.broker.connections) if c.listener_name == "SSL"]
        assert [(c.principal, c.security_protocol, c.sendfile_fd) for c in ssl_conns] == [
            (KafkaPrincipal.user("alice"), "SSL", None)]
    with KafkaConnection(running.broker.config.listeners.listeners[0].host + ":"
                         + str(running.port("PLAINTEXT"))) as plain:
        assert api_versions(plain).error_code == 0
        (pc,) = [c for c in list(running.broker.connections) if c.listener_name == "PLAINTEXT"]
        assert str(pc.principal) == "User:ANONYMOUS" and pc.security_protocol == "PLAINTEXT"


def _refused(running: RunningBroker, security: ClientSecurity) -> None:
    with pytest.raises((ssl.SSLError, OSError, RequestFailed)), \
            KafkaConnection(f"127.0.0.1:{running.port('SSL')}", timeout_s=10,
                            security=security) as conn:
        api_versions(conn)  # TLS 1.3: the client learns of the refusal on its first read


@pytest.mark.parametrize("who", ["none", "expired", "not_yet_valid", "self_signed", "other_ca"])
def test_a_bad_client_certificate_is_one_line_and_others_are_served(
        running: RunningBroker, pki: Pki, who: str, caplog: pytest.LogCaptureFixture) -> None:
    files = None if who == "none" else getattr(pki, who)
    with caplog.at_level(logging.WARNING):
        with KafkaConnection(f"127.0.0.1:{running.port('SSL')}",
                             security=client(pki, pki.alice)) as good:
            _refused(running, client(pki, files))
            assert api_versions(good).error_code == 0  # served all along
        _wait(lambda: any("TLS handshake failed" in r.getMessage() for r in caplog.records))
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "\n" not in lines[0] and "BEGIN" not in lines[0]
    assert all(r.exc_info is None for r in caplog.records)


def test_plaintext_on_the_tls_port_and_tls_on_the_plaintext_port(
        running: RunningBroker, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        with socket.create_connection(("127.0.0.1", running.port("SSL")), timeout=10) as sock:
            sock.sendall(encode_request(API_VERSIONS, 0, 1, {}))
            assert _read_until_closed(sock) == b""  # closed, nothing answered
        _wait(lambda: any("not TLS" in r.getMessage() for r in caplog.records))
        with pytest.raises((ssl.SSLError, OSError)):
            KafkaConnection(f"127.0.0.1:{running.port('PLAINTEXT')}", timeout_s=10,
                            security=client(pki, pki.alice))
        _wait(lambda: any("TLS handshake on PLAINTEXT" in r.getMessage()
                          for r in caplog.records))
    assert all(r.exc_info is None for r in caplog.records)
    with KafkaConnection(f"127.0.0.1:{running.port('PLAINTEXT')}") as plain:
        assert api_versions(plain).error_code == 0


def test_client_checks_the_broker_certificate_names_the_host(tmp_path: Path, pki: Pki) -> None:
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:0", overrides=[
        "listeners=SSL://127.0.0.1:0", f"ssl.keystore.location={pki.wrong_host.keystore}"])
    b = Broker(config)
    b.open()
    r = RunningBroker(b)
    try:
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
            KafkaConnection(f"127.0.0.1:{r.port('SSL')}", security=client(pki, None))
        no_check = client(pki, None, **{"ssl.endpoint.identification.algorithm": "none"})
        with KafkaConnection(f"127.0.0.1:{r.port('SSL')}", security=no_check) as conn:
            assert api_versions(conn).error_code == 0
    finally:
        r.stop()


def test_a_rotated_key_store_is_served_to_new_connections(running: RunningBroker,
                                                          pki: Pki, tmp_path: Path) -> None:
    keystore = Path(str(running.broker.config.get("ssl.keystore.location")))

    def serial() -> int:
        ctx = client(pki, pki.alice).ssl_context()
        assert ctx is not None
        with socket.create_connection(("127.0.0.1", running.port("SSL")), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        from cryptography import x509

        return int(x509.load_der_x509_certificate(der).serial_number)

    before = serial()
    ca, _ = certs.load_or_make_ca(pki.ca.parent)
    fresh = certs.issue(ca, "broker", ("127.0.0.1", "localhost"))
    with KafkaConnection(f"127.0.0.1:{running.port('SSL')}",
                         security=client(pki, pki.alice)) as established:
        certs.write_keystore(keystore, fresh, ca)
        _wait(lambda: serial() != before, timeout_s=15)
        assert serial() == fresh.cert.serial_number
        assert api_versions(established).error_code == 0  # established ones keep theirs


def _read_until_closed(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def _wait(pred: Any, timeout_s: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
