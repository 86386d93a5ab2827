"""Certificates for the TLS tests, made with floodmark's own throwaway CA (``security.certs``):
a CA, a broker certificate for 127.0.0.1/localhost, a client certificate (CN=alice), and the
bad ones (expired, not yet valid, self-signed, another host's, another CA's)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from floodmark.security import certs


@dataclass(frozen=True)
class Pki:
    ca: Path
    broker: certs.NodeFiles
    alice: certs.NodeFiles
    expired: certs.NodeFiles
    not_yet_valid: certs.NodeFiles
    self_signed: certs.NodeFiles
    wrong_host: certs.NodeFiles
    other_ca: certs.NodeFiles


def _files(directory: Path, name: str, issued: certs.Issued,
           ca: certs.Issued | None) -> certs.NodeFiles:
    chain = issued.cert_pem() + (ca.cert_pem() if ca is not None else b"")
    cert = directory / f"{name}.cert.pem"
    cert.write_bytes(chain)
    return certs.NodeFiles(certs.write_keystore(directory / f"{name}.keystore.pem", issued, ca),
                           cert, certs.write_key(directory / f"{name}.key.pem", issued))


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_path = certs.load_or_make_ca(directory)
    now = datetime.datetime.now(datetime.UTC)
    other = certs.make_ca("another CA")
    return Pki(
        ca=ca_path,
        broker=certs.issue_files(directory, "broker", ca, ("127.0.0.1", "localhost")),
        alice=certs.issue_files(directory, "alice", ca, ()),
        expired=_files(directory, "expired", certs.issue(
            ca, "expired", valid_from=now - datetime.timedelta(days=10), days=2), ca),
        not_yet_valid=_files(directory, "future", certs.issue(
            ca, "future", valid_from=now + datetime.timedelta(days=2)), ca),
        self_signed=_files(directory, "selfsigned", certs.issue(None, "selfsigned"), None),
        wrong_host=_files(directory, "wronghost", certs.issue(ca, "elsewhere",
                                                              ("db.example",)), ca),
        other_ca=_files(directory, "otherca", certs.issue(other, "stranger"), other),
    )
