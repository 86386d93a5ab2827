"""Delegation tokens (KIP-48) on a floodmark broker, through Apache Kafka's own tools (4.1.1):
``kafka-delegation-tokens`` creates, describes, renews and expires tokens over SASL_PLAINTEXT
(SCRAM-SHA-512 user ``alice``), and Kafka's console producer and consumer authenticate with a
token (SCRAM-SHA-256, ``tokenauth=true`` in their JAAS config, the token id as user name, the
HMAC as password): the broker sees them as the token's owner. A token-authenticated client may
not create a token (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED), a token expired refuses further
logins, and the tokens are in the metadata log (a broker restart still knows them).

Slow: a JVM per command (``./dev test-slow tests/reference/test_delegation_tokens_on_floodmark.py``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BrokerProcess
from tests.reference.kafka_node import missing_reason, run_tool

pytestmark = pytest.mark.slow

SECRET = "token-secret-7f3a"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


def _scram_config(path: Path, user: str, password: str, *, mechanism: str = "SCRAM-SHA-512",
                  token: bool = False) -> Path:
    extension = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}"{extension};\n')
    return path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("tokens")
    b = BrokerProcess(root / "data", [
        "--set", "listeners=SASL://127.0.0.1:0",
        "--set", "listener.security.protocol.map=SASL:SASL_PLAINTEXT",
        "--set", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        "--set", f"delegation.token.secret.key={SECRET}",
        *(a for user, password in PASSWORDS.items()
          for a in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")),
    ]).start()
    try:
        yield b, root
    finally:
        b.stop()


def tool(name: str, *args: str, input_text: str | None = None) -> str:
    r = run_tool(name, list(args), timeout_s=300, input_text=input_text)
    assert r.returncode == 0, f"{name} {' '.join(args)}: exit {r.returncode}\n{r.stderr[-3000:]}"
    return r.stdout


def _token_rows(out: str) -> dict[str, tuple[str, str]]:
    """token id -> (HMAC, owner) from kafka-delegation-tokens' table (create and describe)."""
    rows = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and re.fullmatch(r"[0-9a-f-]{36}", fields[0]):
            rows[fields[0]] = (fields[1], fields[2])
    return rows


def test_tokens_through_kafka_tools_and_a_token_authenticated_client(
        broker: tuple[BrokerProcess, Path]) -> None:
    b, root = broker
    bs = ("--bootstrap-server", b.bootstrap)
    alice = _scram_config(root / "alice.properties", "alice", PASSWORDS["alice"])
    admin = _scram_config(root / "admin.properties", "admin", PASSWORDS["admin"])
    # create: a token owned by alice, renewable by admin
    out = tool("kafka-delegation-tokens", *bs, "--command-config", str(alice), "--create",
               "--max-life-time-period", "-1", "--renewer-principal", "User:admin")
    created = _token_rows(out)
    assert len(created) == 1, out
    [(token_id, (hmac, owner))] = created.items()
    assert owner == "User:alice"
    # describe: alice sees it (with its HMAC and renewer); without --owner-principal the tool
    # asks for an empty owner list, which Kafka answers with no token
    out = tool("kafka-delegation-tokens", *bs, "--command-config", str(alice), "--describe",
               "--owner-principal", "User:alice")
    assert _token_rows(out) == {token_id: (hmac, "User:alice")}
    assert "User:admin" in out
    out = tool("kafka-delegation-tokens", *bs, "--command-config", str(alice), "--describe")
    assert _token_rows(out) == {}
    # renew by the renewer
    out = tool("kafka-delegation-tokens", *bs, "--command-config", str(admin), "--renew",
               "--renew-time-period", "3600000", "--hmac", hmac)
    assert "Completed renew operation. New expiry date" in out, out

    # a client authenticated with the token: produce and consume as alice
    topic = "tokens-t"
    tool("kafka-topics", *bs, "--command-config", str(admin), "--create", "--topic", topic,
         "--partitions", "1")
    with_token = _scram_config(root / "token.properties", token_id, hmac,
                               mechanism="SCRAM-SHA-256", token=True)
    tool("kafka-console-producer", *bs, "--producer.config", str(with_token), "--topic", topic,
         input_text="one\ntwo\nthree\n")
    out = tool("kafka-console-consumer", *bs, "--consumer.config", str(with_token),
               "--topic", topic, "--from-beginning", "--max-messages", "3",
               "--timeout-ms", "60000")
    assert out.split() == ["one", "two", "three"]
    # ... which may not create a token of its own
    r = run_tool("kafka-delegation-tokens", [*bs, "--command-config", str(with_token),
                                             "--create", "--max-life-time-period", "-1"],
                 timeout_s=300)
    assert r.returncode != 0
    assert "DelegationTokenRequestNotAllowed" in r.stdout + r.stderr or \
        "not allowed" in (r.stdout + r.stderr).lower()

    # the broker restarted replays the token from its metadata log
    port = b.port
    assert port is not None
    b.stop()
    b.start(port)
    bs = ("--bootstrap-server", b.bootstrap)
    described = ("kafka-delegation-tokens", *bs, "--command-config", str(alice), "--describe",
                 "--owner-principal", "User:alice")
    assert _token_rows(tool(*described)) == {token_id: (hmac, "User:alice")}

    # expire now: gone, and the token no longer logs in
    out = tool("kafka-delegation-tokens", *bs, "--command-config", str(alice), "--expire",
               "--expiry-time-period", "-1", "--hmac", hmac)
    assert "Completed expire operation" in out, out
    deadline = time.monotonic() + 60
    while _token_rows(tool(*described)):
        assert time.monotonic() < deadline, "the expired token is still described"
    r = run_tool("kafka-console-consumer", [*bs, "--consumer.config", str(with_token),
                                            "--topic", topic, "--from-beginning",
                                            "--max-messages", "1", "--timeout-ms", "15000"],
                 timeout_s=300)
    assert "one" not in r.stdout.split()
    assert "Authentication failed" in r.stderr or "SaslAuthenticationException" in r.stderr
