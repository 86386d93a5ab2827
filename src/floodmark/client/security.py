"""How the project's client secures its connections: librdkafka's property names, from a client
config file (``--command-config``, Kafka's flag name) or a mapping.

=========================================  ==================================================
``security.protocol``                      PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
``sasl.mechanisms`` (``sasl.mechanism``)   PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
``sasl.username``, ``sasl.password``       the SASL user
``ssl.ca.location``                        PEM file of the CAs to trust (default: the system's)
``ssl.certificate.location``,              a client certificate and key (mTLS)
``ssl.key.location``, ``ssl.key.password``
``ssl.endpoint.identification.algorithm``  ``https`` (default: the broker's name is checked) or
                                           ``none``
=========================================  ==================================================

The file has one ``name=value`` a line; blank lines and ``#`` comments are skipped (Kafka's
``.properties`` files and librdkafka's config files both read this way). Names the client does
not use are ignored, as librdkafka ignores Java-only ones; a bad value is one ``ValueError``
line that never shows the password.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_ca_location: str = ""
    ssl_certificate_location: str = ""
    ssl_key_location: str = ""
    ssl_key_password: str = field(default="", repr=False)
    ssl_endpoint_identification_algorithm: str = "https"

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], source: str = "client config"
                        ) -> ClientSecurity:
        def get(*names: str, default: str = "") -> str:
            for name in names:
                if name in props:
                    return str(props[name]).strip()
            return default

        protocol = get("security.protocol", default="PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"{source}: security.protocol={protocol!r} is not one of "
                             f"{', '.join(PROTOCOLS)}")
        mechanism = get("sasl.mechanisms", "sasl.mechanism",
                        default="GSSAPI" if protocol.startswith("SASL_") else "").upper()
        sec = cls(protocol, mechanism, get("sasl.username"),
                  str(props.get("sasl.password", "")),
                  get("ssl.ca.location"), get("ssl.certificate.location"),
                  get("ssl.key.location"), str(props.get("ssl.key.password", "")),
                  get("ssl.endpoint.identification.algorithm", default="https").lower())
        if sec.uses_sasl:
            if mechanism not in MECHANISMS:
                raise ValueError(f"{source}: sasl.mechanisms={mechanism!r} is not one of "
                                 f"{', '.join(MECHANISMS)}")
            if not sec.sasl_username or not sec.sasl_password:
                raise ValueError(f"{source}: {protocol} needs sasl.username and "
                                 f"sasl.password")
        if sec.ssl_endpoint_identification_algorithm not in ("https", "none", ""):
            raise ValueError(f"{source}: ssl.endpoint.identification.algorithm="
                             f"{sec.ssl_endpoint_identification_algorithm!r} is not https or "
                             f"none")
        return sec

    @classmethod
    def load(cls, path: str | Path) -> ClientSecurity:
        """A client config file (``--command-config``); ValueError/OSError, one line."""
        p = Path(path)
        props: dict[str, str] = {}
        for number, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            stripped = line.strip()
            if not stripped or stripped.startswith(("#", "!")):
                continue
            name, sep, value = stripped.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"{p} line {number}: expected name=value")
            props[name.strip()] = value.strip()
        return cls.from_properties(props, str(p))

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of an SSL / SASL_SSL connection (TLS 1.2 at least), else None."""
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(cafile=self.ssl_ca_location or None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ssl_endpoint_identification_algorithm != "https":
            context.check_hostname = False
        if self.ssl_certificate_location:
            context.load_cert_chain(self.ssl_certificate_location,
                                    self.ssl_key_location or None,
                                    self.ssl_key_password or None)
        return context


PLAINTEXT = ClientSecurity()
