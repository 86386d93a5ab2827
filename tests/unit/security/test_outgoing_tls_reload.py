"""A node's outgoing TLS context (replica fetching, transaction markers, the controller channel:
``ClientSecurity.for_node``) is rebuilt when its key or trust store file changes, as a
listener's is; a store that does not load keeps the previous context. A client's context from
client properties (the CLI) is built once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from floodmark.security import certs, tls
from floodmark.security.client_security import ClientSecurity
from floodmark.security.listeners import SecurityProtocol


def _trusted_cns(ctx: object) -> set[str]:
    return {dict(x[0] for x in c["subject"])["commonName"]
            for c in ctx.get_ca_certs()}  # type: ignore[attr-defined]


def test_a_rotated_trust_and_key_store_reach_new_outgoing_connections(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(tls, "RELOAD_CHECK_S", 0.0)
    first = certs.make_ca("first CA")
    ca_path = tmp_path / "ca.pem"
    ca_path.write_bytes(first.cert_pem())
    node = certs.issue_files(tmp_path, "node-1", first, ("127.0.0.1",))
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(node.keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_path)}
    sec = ClientSecurity.for_node(settings.get, SecurityProtocol.SSL, "INTERNAL")
    before = sec.ssl_context()
    assert before is not None and _trusted_cns(before) == {"first CA"}
    assert sec.ssl_context() is before  # nothing changed: the same context

    second = certs.make_ca("second CA")
    certs.issue_files(tmp_path, "node-1", second, ("127.0.0.1",))  # written whole, renamed
    (tmp_path / "ca.new").write_bytes(second.cert_pem())
    (tmp_path / "ca.new").replace(ca_path)
    with caplog.at_level(logging.INFO, logger="floodmark.security.tls"):
        after = sec.ssl_context()
    assert after is not None and after is not before
    assert _trusted_cns(after) == {"second CA"}
    assert any("outgoing TLS (SSL): TLS key/trust store changed, reloaded" in r.getMessage()
               for r in caplog.records)

    # a half-written store: one line, the previous context stays
    ca_path.write_text("-----BEGIN CERTIFICATE-----\nnot yet\n")
    with caplog.at_level(logging.WARNING, logger="floodmark.security.tls"):
        assert sec.ssl_context() is after
    assert any("keeping the previous one" in r.getMessage() for r in caplog.records)


def test_a_client_properties_context_is_built_once(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "RELOAD_CHECK_S", 0.0)
    ca = certs.make_ca("client CA")
    ca_path = tmp_path / "ca.pem"
    ca_path.write_bytes(ca.cert_pem())
    sec = ClientSecurity.from_properties({"security.protocol": "SSL",
                                          "ssl.ca.location": str(ca_path)})
    ctx = sec.ssl_context()
    ca_path.write_bytes(certs.make_ca("other").cert_pem())
    assert sec.ssl_context() is ctx
