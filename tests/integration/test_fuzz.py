"""Issue 8: no request, however malformed, may end the broker process.

A bounded fuzz run (``floodmark.chaos.fuzz``) against a real broker process: mutated requests for
every API and version the broker advertises (truncated, bit-flipped, overwritten, huge counts,
random bodies, lying size prefixes, trickled bytes), including the two frames that once aborted
it, on eight connections at once, while a confluent-kafka producer (acks=all, idempotent) keeps
writing. The broker must be alive at the end, answer a well-behaved client, have lost nothing it
acknowledged, never have failed inside a handler (every refusal is a clean error), and its memory
must stay bounded. Each run first sweeps every (api key, version, mutation) once (the fuzzer's
sweep: 250 versions x 9 mutations = 2,250 frames at the time of writing), then draws at random;
the tests check the sweep was complete. A longer run is ``./dev test-slow`` or
``benchmarks/fuzz_broker.py``.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from floodmark.chaos.fuzz import FuzzConfig, run_fuzz
from floodmark.client import KafkaConnection

pytestmark = pytest.mark.integration

ABORTING_FRAMES = [
    "0000001b000a00061f55d2b300047266757a007fffffffcd1ab591b64cfee1",
    "00000025002000043459cf0000047266757a00ddb4bca70d53de4c7d61a801e0cf143affca216ea66d",
]


def _fuzz(broker_factory, frames: int, time_limit_s: float, seed: int) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory()
    for frame_hex in ABORTING_FRAMES:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
            s.sendall(bytes.fromhex(frame_hex))
            assert s.recv(100) == b""  # closed by the broker, which lives on
    assert broker.proc.poll() is None
    report = run_fuzz(FuzzConfig(broker.bootstrap, frames=frames, time_limit_s=time_limit_s,
                                 seed=seed, broker_pid=broker.proc.pid))
    data = report.as_json()
    print(data)
    assert report.broker_alive, "the broker process died"
    assert report.frames > 200 and report.apis >= 20, data
    assert not report.unswept, report.unswept[:20]  # every mutation of every version was sent
    assert report.acknowledged > 0 and not report.lost and not report.client_errors, data
    with KafkaConnection(broker.bootstrap) as conn:  # a well-behaved client is still served
        assert conn.request(18, 3, {"client_software_name": "t",
                                    "client_software_version": "1"}).error_code == 0
    assert report.rss_after_kb < report.rss_before_kb + 400_000, data
    log = Path(broker.log_path).read_text(errors="replace")
    assert "handler failed" not in log and "Traceback" not in log, \
        [line for line in log.splitlines() if "rror" in line][:10]


def test_fuzz_every_advertised_api_broker_survives(broker_factory) -> None:  # type: ignore[no-untyped-def]
    # the sweep, then as many random frames again and more (30,000 before the sweep; the time
    # limit ended those runs at ~18,500 frames, 26-31 CPU s)
    _fuzz(broker_factory, frames=6_000, time_limit_s=45, seed=1)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_fuzz_long_run(broker_factory) -> None:  # type: ignore[no-untyped-def]
    _fuzz(broker_factory, frames=1_000_000, time_limit_s=1800, seed=7)


def test_fuzz_over_tls_before_a_sasl_login(tmp_path: Path) -> None:
    """Issue 21: the fuzzer over a SASL_SSL listener. Its frames go over TLS and before any
    login, so they meet the broker's TLS handshake path and its pre-authentication rules
    (only ApiVersions and the SASL exchange, bounded sizes), SaslHandshake and SaslAuthenticate
    fuzzed among them; a SCRAM-logged-in producer keeps writing throughout and loses nothing."""
    from tests.conftest import BrokerProcess
    from tests.tls_pki import make_pki

    pki = make_pki(tmp_path / "tls")
    password = "fuzz-secret-1"
    broker = BrokerProcess(tmp_path / "data", [
        "--set", "listeners=SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=SASL:SASL_SSL",
        "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "--set", "ssl.keystore.type=PEM",
        "--set", f"ssl.keystore.location={pki.broker.keystore}",
        "--set", "connection.failed.authentication.delay.ms=100",
        "--add-scram", f"SCRAM-SHA-512=[name=fuzzer,password={password}]"]).start()
    try:
        props = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                 "sasl.username": "fuzzer", "sasl.password": password,
                 "ssl.ca.location": str(pki.ca)}
        assert broker.proc is not None
        # the sweep (2,250 frames) and some; the time limit only bounds a slow machine
        report = run_fuzz(FuzzConfig(broker.bootstrap, frames=3_000, time_limit_s=40, seed=3,
                                     broker_pid=broker.proc.pid, connections=4,
                                     client_properties=props))
        data = report.as_json()
        print(data)
        assert report.broker_alive, "the broker process died"
        assert report.frames > 200 and report.answered > 0 and report.closed > 0, data
        assert not report.unswept, report.unswept[:20]
        assert report.acknowledged > 0 and not report.lost and not report.client_errors, data
        log = Path(broker.log_path).read_text(errors="replace")
        assert "handler failed" not in log and "Traceback" not in log, \
            [line for line in log.splitlines() if "rror" in line][:10]
    finally:
        broker.stop()
