"""The dashboard behind TLS and a password (issue 21 §6): ``floodmark ui --tls-cert --tls-key
--password-file`` serves HTTPS, and every request, the page and the API alike, must carry HTTP
Basic credentials; wrong or missing ones answer 401 with a Basic challenge. A password over
plain HTTP on a non-loopback address is refused at start, in one line."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.cluster.helpers import stop_process
from tests.tls_pki import make_pki
from tests.ui.conftest import REPO, run_ui

pytestmark = pytest.mark.integration


def _get(url: str, context: ssl.SSLContext | None, auth: tuple[str, str] | None) -> int:
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(
            f"{auth[0]}:{auth[1]}".encode()).decode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=30, context=context) as answer:
            json.loads(answer.read()) if url.endswith("/api/partitions") else answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            assert exc.headers["WWW-Authenticate"] == 'Basic realm="floodmark"'
        return int(exc.code)


def test_https_and_a_password_guard_the_page_and_the_api(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pki = make_pki(tmp_path / "tls")
    secret = tmp_path / "ui.password"
    secret.write_text("dash-secret-21\n")
    with run_ui(tmp_path / "ui.log", "--bootstrap", broker.bootstrap,
                "--tls-cert", str(pki.broker.cert), "--tls-key", str(pki.broker.key),
                "--password-file", str(secret), "--user", "ops", scheme="https") as base:
        assert base.startswith("https://127.0.0.1:")
        trust = ssl.create_default_context(cafile=str(pki.ca))
        for path in ("/", "/api/partitions"):
            assert _get(base + path.lstrip("/"), trust, None) == 401
            assert _get(base + path.lstrip("/"), trust, ("ops", "wrong")) == 401
            assert _get(base + path.lstrip("/"), trust, ("other", "dash-secret-21")) == 401
            assert _get(base + path.lstrip("/"), trust, ("ops", "dash-secret-21")) == 200
        # plain HTTP to the TLS port gets no page
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _get(base.replace("https://", "http://") + "api/partitions", None,
                 ("ops", "dash-secret-21"))
    assert "dash-secret-21" not in (tmp_path / "ui.log").read_text()


def test_a_password_over_plain_http_off_loopback_is_refused(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "ui.password"
    secret.write_text("dash-secret-21\n")
    proc = subprocess.Popen([sys.executable, "-m", "floodmark.cli", "ui", "--bootstrap",
                             broker.bootstrap, "--password-file", str(secret),
                             "--listen", "0.0.0.0:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        _out, err = proc.communicate(timeout=60)
    finally:
        stop_process(proc)
    assert proc.returncode == 1
    assert err.strip().count("\n") == 0 and "in the clear" in err, err
    assert "dash-secret-21" not in err
