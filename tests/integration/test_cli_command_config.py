"""``--command-config FILE`` (Kafka's name; librdkafka's property names): the CLI's topic,
produce and consume commands over an SSL listener; a bad file is one line."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from floodmark.cli.main import main
from tests.conftest import BrokerProcess
from tests.tls_pki import make_pki


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, stdin: str | None = None) -> Ran:
    """The CLI's own entry point, in this process (a subprocess each would double the test's
    time on a loaded machine)."""
    out, err = io.BytesIO(), io.StringIO()
    text_out = io.TextIOWrapper(out, write_through=True)
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
        mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((stdin or "").encode())))
        mp.setattr(sys, "stdout", text_out)
        code = main(list(args))
        text_out.flush()
    return Ran(code, out.getvalue().decode(), err.getvalue())


def test_cli_over_ssl_with_command_config(tmp_path: Path,
                                          broker_factory: Callable[..., BrokerProcess]) -> None:
    pki = make_pki(tmp_path / "pki")
    b = broker_factory("--set", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                       "--set", f"ssl.keystore.location={pki.broker.keystore}")
    assert b.proc is not None and b.proc.stdout is not None
    port = None
    while port is None:
        m = re.search(r"listener SSL \(SSL\) at \S+:(\d+)", b.proc.stdout.readline().decode())
        port = m.group(1) if m else None
    config = tmp_path / "client.properties"
    config.write_text(f"security.protocol=SSL\nssl.ca.location={pki.ca}\n")
    ssl_args = ["--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(config)]
    assert cli("topic", "create", "secure", "--partitions", "1", *ssl_args).returncode == 0
    assert cli("produce", "secure", *ssl_args, stdin="one\ntwo\n").returncode == 0
    out = cli("consume", "secure", "--from-beginning", "--max-messages", "2", *ssl_args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["one", "two"]
    # Without the config, the SSL port is not spoken to in plaintext: one line, exit 1.
    plain = cli("topic", "list", "--bootstrap-server", f"127.0.0.1:{port}")
    assert plain.returncode == 1 and len(plain.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SSL\nssl.ca.location=/nope/ca.pem\nsasl.password=s3cret\n")
    refused = cli("topic", "list", "--bootstrap-server", f"127.0.0.1:{port}",
                  "--command-config", str(bad))
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"error: --command-config {bad}: ssl.ca.location=/nope/ca.pem: no such file"]
