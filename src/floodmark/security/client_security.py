"""How a client connects: ``ClientSecurity``, built in one place from librdkafka's property names
(a ``--command-config`` file, a dict of client settings) or from a node's own Kafka settings
(replica fetching, transaction markers, the controller RPC).

librdkafka's names (what ``client.properties`` files hold):

``security.protocol``                      plaintext | ssl | sasl_plaintext | sasl_ssl
``ssl.ca.location``                        PEM file of the CA certificates to trust
                                           (default: the system's)
``ssl.certificate.location``               PEM file of this client's certificate (mTLS)
``ssl.key.location``                       PEM file of its private key
``ssl.key.password``                       the key's password
``ssl.endpoint.identification.algorithm``  https (the default: the broker's certificate must
                                           name the host dialled) | none
``sasl.mechanisms`` (``sasl.mechanism``)   PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512, for
                                           sasl_plaintext and sasl_ssl
``sasl.username``, ``sasl.password``       the SASL user (``client/sasl.py`` authenticates)
``sasl.oauthbearer.token.endpoint.url``    OAUTHBEARER: ``file:///path`` (the token in a file) or
                                           the token endpoint (client credentials:
                                           ``sasl.oauthbearer.client.id``/``.client.secret``,
                                           ``sasl.oauthbearer.scope``; ``client/oauthbearer.py``)
``sasl.jaas.config``                       the Java client's way to give them: a PlainLoginModule
                                           or ScramLoginModule entry's ``username="..."
                                           password="..."`` (what Spark users set as
                                           ``kafka.sasl.jaas.config``)

The Java client's PEM names are read too (``ssl.truststore.location`` as the CA file,
``ssl.keystore.location`` as certificate and key in one file), so a Kafka command-config file
works as it is. Every other property is kept, untouched, in ``extra`` (``sasl.*`` are read by
the SASL layer from there).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from floodmark.security.listeners import SecurityProtocol

# TLS, SASL and JAAS are loaded by the paths that use them: a plaintext client (every CLI
# command) loads none of them.
if TYPE_CHECKING:
    from floodmark.security.tls import ReloadingContext, SslSettings

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
KNOWN = frozenset({
    "sasl.mechanisms", "sasl.mechanism", "sasl.username", "sasl.password",
    "security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.truststore.location",
    "ssl.truststore.type", "ssl.keystore.location", "ssl.keystore.type", "sasl.jaas.config",
})
SECRET_MARKERS = ("password", "secret", "jaas", "token")


def is_secret(name: str) -> bool:
    """A property whose value must never reach a log line or an error message."""
    return any(marker in name.lower() for marker in SECRET_MARKERS)


@dataclass(frozen=True)
class ClientSecurity:
    """A client's security settings, checked. ``PLAINTEXT`` is the default (no TLS)."""

    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    extra: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Properties this class does not read (``sasl.*`` ...), as given."""
    node_ssl: SslSettings | None = field(default=None, repr=False)
    """A node's own ``ssl.*`` settings, when built by ``for_node``."""
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol.uses_tls

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.uses_sasl

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ClientSecurity:
        """From librdkafka-named properties. ValueError: one line, never a secret value."""
        text = {str(k).strip(): str(v).strip() for k, v in props.items()}
        protocol = SecurityProtocol.parse(text.get("security.protocol", "plaintext"),
                                          what="security.protocol")
        for kind in ("ssl.truststore.type", "ssl.keystore.type"):
            if kind in text and text[kind].upper() != "PEM":
                raise ValueError(f"{kind}={text[kind]}: only PEM files are read")
        ca = text.get("ssl.ca.location") or text.get("ssl.truststore.location")
        cert = text.get("ssl.certificate.location") or text.get("ssl.keystore.location")
        key = text.get("ssl.key.location") or (text.get("ssl.keystore.location")
                                               if "ssl.certificate.location" not in text
                                               else None)
        if key is not None and cert is None:
            raise ValueError("ssl.key.location is set without ssl.certificate.location")
        for name, path in (("ssl.ca.location", ca), ("ssl.certificate.location", cert),
                           ("ssl.key.location", key)):
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{name}={path}: no such file")
        algorithm = text.get("ssl.endpoint.identification.algorithm", "https").lower()
        if algorithm not in ("https", "none", ""):
            raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm}: expected "
                             "https or none")
        mechanism = (text.get("sasl.mechanisms") or text.get("sasl.mechanism") or "").upper()
        username, password = text.get("sasl.username", ""), text.get("sasl.password", "")
        if "sasl.jaas.config" in text and not (username or password):
            from floodmark.security.jaas import jaas_credentials

            username, password = jaas_credentials(
                text["sasl.jaas.config"], mechanism if mechanism in SASL_MECHANISMS else None)
        if protocol.uses_sasl:
            if mechanism not in (*SASL_MECHANISMS, "OAUTHBEARER"):
                raise ValueError(f"sasl.mechanisms={mechanism or '(unset)'}: expected one of "
                                 f"{', '.join(SASL_MECHANISMS)}, OAUTHBEARER with "
                                 f"{protocol.value}")
            if mechanism == "OAUTHBEARER":
                if not text.get("sasl.oauthbearer.token.endpoint.url"):
                    raise ValueError("OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url "
                                     "(file:///path/to/token or the token endpoint)")
            elif not username or not password:
                raise ValueError(f"{protocol.value} needs sasl.username and sasl.password")
        return cls(protocol, ca, cert, key, text.get("ssl.key.password") or None,
                   algorithm == "https",
                   {k: v for k, v in text.items() if k not in KNOWN},
                   sasl_mechanism=mechanism, sasl_username=username, sasl_password=password)

    @classmethod
    def load(cls, path: str | Path) -> ClientSecurity:
        """A ``key=value`` properties file (Kafka's ``--command-config``)."""
        return cls.from_properties(read_properties(path))

    @classmethod
    def for_node(cls, get: Callable[[str], object], protocol: SecurityProtocol,
                 listener: str | None = None) -> ClientSecurity:
        """How a node dials another node's listener (``listener``, of ``protocol``): with its
        own key store as client certificate and its trust store (Kafka's ``ssl.*`` names, the
        listener's ``listener.name.<name>.ssl.*`` first); on a SASL listener, logged in with
        ``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS credentials
        (``security.inter_broker``). ValueError: one line, never a secret."""
        sasl, settings = None, None
        if protocol.uses_sasl:
            from floodmark.security.inter_broker import inter_broker_sasl

            sasl = inter_broker_sasl(get, listener or protocol.value)
        if protocol.uses_tls:
            from floodmark.security.tls import ssl_settings

            settings = ssl_settings(get, listener)
        return cls(protocol,
                   check_hostname=True if settings is None else settings.check_hostname,
                   node_ssl=settings,
                   sasl_mechanism="" if sasl is None else sasl.mechanism,
                   sasl_username="" if sasl is None else sasl.username,
                   sasl_password="" if sasl is None else sasl.password)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client's TLS context (None without TLS). A node's (``for_node``) is rebuilt
        when its key or trust store file changes (``tls.ReloadingContext``: a rotated
        certificate reaches new connections to other nodes); one from client properties is
        built once. ValueError when a file does not load at first."""
        if self._node_context is not None:
            return self._node_context.context()
        return self._context

    @functools.cached_property
    def _node_context(self) -> ReloadingContext | None:
        if not self.uses_tls or self.node_ssl is None:
            return None
        from floodmark.security.tls import ReloadingContext, client_context

        return ReloadingContext(self.node_ssl, client_context,
                                f"outgoing TLS ({self.security_protocol.value})")

    @functools.cached_property
    def _context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            if self.ca_location is not None:
                ctx.load_verify_locations(cafile=self.ca_location)
            else:
                ctx.load_default_certs()
            if self.certificate_location is not None:
                ctx.load_cert_chain(self.certificate_location, self.key_location,
                                    password=self.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS files do not load: {getattr(exc, 'reason', None) or exc}"
                             ) from None
        ctx.check_hostname = self.check_hostname
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def server_hostname(self, host: str) -> str | None:
        """What to pass as ``server_hostname`` when dialling ``host`` (None without TLS)."""
        return host if self.uses_tls else None

    def describe(self) -> str:
        """One line for logs: the protocol and which files, never a password."""
        login = ("" if not self.uses_sasl else " without a SASL login" if not self.sasl_mechanism
                 else f" SASL/{self.sasl_mechanism} as User:{self.sasl_username}")
        if not self.uses_tls:
            return self.security_protocol.value + login
        files = ", ".join(f"{k}={v}" for k, v in (("ca", self.ca_location),
                                                  ("cert", self.certificate_location)) if v)
        return f"{self.security_protocol.value} ({files or 'node ssl.* settings'}){login}"


PLAINTEXT = ClientSecurity()


def read_properties(path: str | Path) -> dict[str, str]:
    """``key=value`` lines (``key: value`` too); ``#`` and ``!`` start comments. ValueError:
    one line naming the file and line, never the value (it may be a password)."""
    out: dict[str, str] = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ValueError(f"{path}:{number}: expected key=value")
        out[line[:cut].strip()] = line[cut + 1:].strip()
    return out
