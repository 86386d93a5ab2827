"""A throwaway certificate authority and the certificates it signs, for ``floodmark cluster up
--security ...`` and for tests: PEM files that Kafka's ``ssl.keystore.type=PEM`` settings and
librdkafka's ``ssl.ca.location`` / ``ssl.certificate.location`` read.

Not a PKI: keys are ECDSA P-256 (quick to make; every Kafka client supports them), the CA's key is
kept beside its certificate in the cluster's data directory (so the directory's owner can issue
more), and nothing is revoked. Production clusters bring their own certificates.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 825


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        algorithm: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8, algorithm)


def _name(common_name: str, organization: str = "floodmark") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def make_ca(common_name: str = "floodmark throwaway CA", days: int = DEFAULT_DAYS) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return Issued(cert, key)


def issue(ca: Issued | None, common_name: str, hosts: tuple[str, ...] = ("127.0.0.1",
                                                                         "localhost"), *,
          organization: str = "floodmark", days: int = DEFAULT_DAYS,
          valid_from: datetime.datetime | None = None) -> Issued:
    """A certificate for ``common_name``, good as a TLS server (for ``hosts``: DNS names and IP
    addresses) and as a TLS client; signed by ``ca`` (None: self-signed)."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = valid_from or _now() - datetime.timedelta(minutes=5)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = _name(common_name, organization)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(ca.cert.subject if ca is not None else subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]),
                              critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.key if ca is not None else key, hashes.SHA256())
    return Issued(cert, key)


def _write(path: Path, data: bytes, private: bool) -> Path:
    """Written whole under a temporary name, then renamed: a reader (a listener reloading its
    key store) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return path


def write_keystore(path: Path, issued: Issued, ca: Issued | None = None,
                   password: str | None = None) -> Path:
    """One PEM file: the certificate, the CA's (the chain), the private key (encrypted with
    ``password`` if given): ``ssl.keystore.location`` with ``ssl.keystore.type=PEM``."""
    chain = issued.cert_pem() + (ca.cert_pem() if ca is not None else b"")
    return _write(path, chain + issued.key_pem(password), private=True)


def write_cert(path: Path, issued: Issued) -> Path:
    """The certificate alone (a trust store, ``ssl.ca.location``)."""
    return _write(path, issued.cert_pem(), private=False)


def write_key(path: Path, issued: Issued, password: str | None = None) -> Path:
    return _write(path, issued.key_pem(password), private=True)


@dataclass(frozen=True)
class NodeFiles:
    keystore: Path
    """Certificate chain and key, one PEM (``ssl.keystore.location``)."""
    cert: Path
    """The certificate alone (librdkafka's ``ssl.certificate.location``)."""
    key: Path
    """The private key alone (``ssl.key.location``)."""


def issue_files(directory: Path, name: str, ca: Issued, hosts: tuple[str, ...]) -> NodeFiles:
    """``name``'s certificate (CN=name) signed by ``ca``, written three ways under
    ``directory``: ``name.keystore.pem``, ``name.cert.pem``, ``name.key.pem``."""
    issued = issue(ca, name, hosts)
    return NodeFiles(write_keystore(directory / f"{name}.keystore.pem", issued, ca),
                     _write(directory / f"{name}.cert.pem", issued.cert_pem() + ca.cert_pem(),
                            private=False),
                     write_key(directory / f"{name}.key.pem", issued))


def load_or_make_ca(directory: Path) -> tuple[Issued, Path]:
    """The CA of ``directory`` (``ca.pem`` and ``ca.key.pem``), made on first use; and the path
    of its certificate (the trust store every node and client uses)."""
    cert_path, key_path = directory / "ca.pem", directory / "ca.key.pem"
    if cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path}: not the EC key of a floodmark CA")
        return Issued(cert, key), cert_path
    ca = make_ca()
    write_key(key_path, ca)
    write_cert(cert_path, ca)
    return ca, cert_path
