"""TLS from Kafka's ``ssl.*`` settings: the ``ssl.SSLContext`` of a node's TLS listener (server
side) and of its connections to other nodes (client side), and the mTLS principal.

Settings (Kafka's names; a listener's own ``listener.name.<name>.ssl.*`` wins over ``ssl.*``):

``ssl.keystore.type``                PEM only (JKS/PKCS12: convert with ``openssl``).
``ssl.keystore.location``            a PEM file: the certificate chain and the private key.
``ssl.keystore.certificate.chain``   the same inline (PEM text), with ``ssl.keystore.key``.
``ssl.key.password``                 the private key's password, if it is encrypted.
``ssl.truststore.type``              PEM only.
``ssl.truststore.location``          a PEM file of trusted CA certificates (default: the
                                     system's), or inline ``ssl.truststore.certificates``.
``ssl.client.auth``                  none | requested | required (client certificates).
``ssl.enabled.protocols``            TLSv1.2,TLSv1.3 (the default); nothing older is accepted.
``ssl.cipher.suites``                OpenSSL cipher names for TLS 1.2 (default: OpenSSL's).
``ssl.endpoint.identification.algorithm``  https (the default: a node checks its peer's
                                     certificate names the host it dialled) or empty (no check).
``ssl.principal.mapping.rules``      the client certificate's subject to ``User:<name>``.

Rotation: ``ReloadingContext.context`` looks at the key store's and trust store's modification
times at most once a second and builds a new context when one changed; new connections get it,
established ones keep theirs (KIP-226's effect without an AlterConfigs call). A listener's
context (``ServerTls``) and a node's context for dialling other nodes both reload. A store that
does not load (a half-written file) is one log line and the old context stays in use.
"""

from __future__ import annotations

import enum
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from floodmark.errors import FloodmarkError
from floodmark.security.principal import ANONYMOUS, KafkaPrincipal
from floodmark.security.principal_mapping import MappingRule, NoMatchingRule, map_name, parse_rules

log = logging.getLogger(__name__)

Getter = Callable[[str], object]
"""A setting's value by Kafka's name (None: not set)."""

RELOAD_CHECK_S = 1.0
HANDSHAKE_TIMEOUT_S = 10.0
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class ClientAuth(enum.Enum):
    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


class TlsRefused(FloodmarkError):
    """A TLS connection refused after (or during) its handshake, e.g. no mapping rule."""

    @staticmethod
    def describe(exc: BaseException) -> str:
        """One line saying why a handshake failed (never the key material)."""
        if isinstance(exc, ssl.SSLCertVerificationError):
            text = f"certificate verify failed: {exc.verify_message}"
        elif isinstance(exc, ssl.SSLError):
            text = exc.reason or str(exc)
            if exc.reason == "WRONG_VERSION_NUMBER" or exc.reason == "HTTP_REQUEST":
                text += " (not TLS: a plaintext client on a TLS listener?)"
        elif isinstance(exc, TimeoutError):
            text = "no handshake within the timeout"
        else:
            text = str(exc) or type(exc).__name__
        return " ".join(text.split())


def _get(get: Getter, name: str, listener: str | None) -> str | None:
    """``listener.name.<listener>.<name>``, else ``<name>``; blank is unset."""
    for key in ((f"listener.name.{listener.lower()}.{name}",) if listener else ()) + (name,):
        value = get(key)
        if value is not None and str(value).strip() != "":
            return str(value).strip()
    return None


@dataclass(frozen=True, slots=True)
class SslSettings:
    """A node's (or one listener's) ``ssl.*`` settings, checked."""

    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: str | None = None
    check_hostname: bool = True
    principal_rules: tuple[MappingRule, ...] = (MappingRule(None),)

    def __repr__(self) -> str:  # never print the key password or an inline key
        return (f"SslSettings(keystore={self.keystore_location or 'inline' if self.has_keystore else None}, "
                f"truststore={self.truststore_location or 'inline' if self.has_truststore else None}, "
                f"client_auth={self.client_auth.value})")

    @property
    def has_keystore(self) -> bool:
        return self.keystore_location is not None or self.keystore_certificate_chain is not None

    @property
    def has_truststore(self) -> bool:
        return self.truststore_location is not None or self.truststore_certificates is not None

    @property
    def watched_files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.keystore_location, self.truststore_location) if f)


def ssl_settings(get: Getter, listener: str | None = None) -> SslSettings:
    """The ``ssl.*`` settings of ``listener`` (or the node's). ValueError: one line."""
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        value = _get(get, kind, listener)
        if value is not None and value.upper() != "PEM":
            raise ValueError(f"{kind}={value}: floodmark reads PEM stores only (convert with "
                             "openssl pkcs12 -nodes)")
    location = _get(get, "ssl.keystore.location", listener)
    chain = _get(get, "ssl.keystore.certificate.chain", listener)
    key = _get(get, "ssl.keystore.key", listener)
    if location is not None and chain is not None:
        raise ValueError("ssl.keystore.location and ssl.keystore.certificate.chain are both set")
    if (chain is None) != (key is None):
        raise ValueError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
    trust_location = _get(get, "ssl.truststore.location", listener)
    trust_pem = _get(get, "ssl.truststore.certificates", listener)
    for name, path in (("ssl.keystore.location", location),
                       ("ssl.truststore.location", trust_location)):
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"{name}={path}: no such file")
    auth_text = (_get(get, "ssl.client.auth", listener) or "none").lower()
    try:
        client_auth = ClientAuth(auth_text)
    except ValueError:
        raise ValueError(f"ssl.client.auth={auth_text}: expected none, requested or "
                         "required") from None
    protocols = tuple(p.strip() for p in (_get(get, "ssl.enabled.protocols", listener)
                                          or "TLSv1.2,TLSv1.3").split(",") if p.strip())
    bad = [p for p in protocols if p not in _PROTOCOLS]
    if bad or not protocols:
        raise ValueError(f"ssl.enabled.protocols={','.join(protocols)}: only TLSv1.2 and "
                         "TLSv1.3 are accepted")
    algorithm = get("ssl.endpoint.identification.algorithm")
    algorithm_text = "https" if algorithm is None else str(algorithm).strip().lower()
    if algorithm_text not in ("https", ""):
        raise ValueError(f"ssl.endpoint.identification.algorithm={algorithm_text}: expected "
                         "https or empty")
    password = _get(get, "ssl.key.password", listener)
    return SslSettings(
        keystore_location=location, keystore_certificate_chain=chain, keystore_key=key,
        key_password=password, truststore_location=trust_location,
        truststore_certificates=trust_pem, client_auth=client_auth,
        enabled_protocols=protocols,
        cipher_suites=_get(get, "ssl.cipher.suites", listener),
        check_hostname=algorithm_text == "https",
        principal_rules=parse_rules(_get(get, "ssl.principal.mapping.rules", listener)))


def _load_keystore(ctx: ssl.SSLContext, s: SslSettings) -> None:
    if s.keystore_location is not None:
        ctx.load_cert_chain(s.keystore_location, password=s.key_password)
    elif s.keystore_certificate_chain is not None and s.keystore_key is not None:
        # ssl loads key pairs from files only: a private temporary one, gone at once.
        with tempfile.TemporaryDirectory(prefix="floodmark-tls-") as tmp:
            path = os.path.join(tmp, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(s.keystore_certificate_chain.strip() + "\n"
                         + s.keystore_key.strip() + "\n")
            ctx.load_cert_chain(path, password=s.key_password)


def _load_truststore(ctx: ssl.SSLContext, s: SslSettings) -> None:
    if s.truststore_location is not None:
        ctx.load_verify_locations(cafile=s.truststore_location)
    elif s.truststore_certificates is not None:
        ctx.load_verify_locations(cadata=s.truststore_certificates)
    else:
        ctx.load_default_certs()


def _versions(ctx: ssl.SSLContext, protocols: tuple[str, ...]) -> None:
    versions = sorted(_PROTOCOLS[p] for p in protocols)
    ctx.minimum_version = versions[0]
    ctx.maximum_version = versions[-1]


def server_context(s: SslSettings) -> ssl.SSLContext:
    """A TLS listener's context. ValueError (one line) when a store does not load."""
    if not s.has_keystore:
        raise ValueError("a TLS listener needs ssl.keystore.location (or "
                         "ssl.keystore.certificate.chain and ssl.keystore.key)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(ctx, s.enabled_protocols)
    try:
        _load_keystore(ctx, s)
        if s.client_auth is not ClientAuth.NONE:
            _load_truststore(ctx, s)
        if s.cipher_suites:
            ctx.set_ciphers(s.cipher_suites)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"TLS key or trust store does not load: {TlsRefused.describe(exc)}"
                         ) from None
    ctx.verify_mode = {ClientAuth.NONE: ssl.CERT_NONE, ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
                       ClientAuth.REQUIRED: ssl.CERT_REQUIRED}[s.client_auth]
    # A client's TLS 1.2 renegotiation is refused, as Kafka's SslTransportLayer refuses it: an
    # SSL_write waiting on a renegotiation while reading is paused would stall the connection.
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    return ctx


def client_context(s: SslSettings) -> ssl.SSLContext:
    """A node's context for dialling another node (mTLS when it has a key store)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(ctx, s.enabled_protocols)
    try:
        _load_truststore(ctx, s)
        if s.has_keystore:
            _load_keystore(ctx, s)
        if s.cipher_suites:
            ctx.set_ciphers(s.cipher_suites)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"TLS key or trust store does not load: {TlsRefused.describe(exc)}"
                         ) from None
    ctx.check_hostname = s.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def peer_subject(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The peer certificate's subject in RFC 2253 form (``CN=alice,O=acme``), None without
    one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


class ReloadingContext:
    """A TLS context built from a node's store files (``build(settings)``), rebuilt when one of
    them changes: ``context()`` looks at their modification times at most once a second. A
    store that does not load (a half-written file) is one log line and the previous context
    stays in use. Listeners (``ServerTls``) and a node's outgoing connections (replica
    fetching, transaction markers, the controller channel: ``ClientSecurity.for_node``) use
    it, so a rotated certificate reaches both sides' new connections."""

    def __init__(self, settings: SslSettings, build: Callable[[SslSettings], ssl.SSLContext],
                 what: str) -> None:
        """``what``: whose context, for the log (``listener SSL``, ``outgoing TLS``)."""
        self.settings = settings
        self.what = what
        self._build = build
        self._stamp = self._stamps()
        self._context = build(settings)
        self._checked_s = time.monotonic()
        self.reloads = 0

    def _stamps(self) -> tuple[tuple[int, int], ...]:
        out = []
        for path in self.settings.watched_files:
            try:
                st = os.stat(path)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((-1, -1))
        return tuple(out)

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: rebuilt when a store file changed."""
        now = time.monotonic()
        if now - self._checked_s >= RELOAD_CHECK_S:
            self._checked_s = now
            stamp = self._stamps()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._context = self._build(self.settings)
                    self.reloads += 1
                    log.info("%s: TLS key/trust store changed, reloaded (new connections use "
                             "it)", self.what)
                except ValueError as exc:
                    log.warning("%s: TLS store changed but %s; keeping the previous one",
                                self.what, exc)
        return self._context


class ServerTls:
    """A TLS listener: its current context (reloaded when a store file changes) and how a
    handshake's client certificate becomes the connection's principal."""

    def __init__(self, settings: SslSettings, listener: str = "SSL") -> None:
        self.settings = settings
        self.listener = listener
        self.handshake_timeout_s = HANDSHAKE_TIMEOUT_S
        self._reloading = ReloadingContext(settings, server_context, f"listener {listener}")

    @property
    def reloads(self) -> int:
        return self._reloading.reloads

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: rebuilt when a store file changed."""
        return self._reloading.context()

    def principal_of(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """``User:<mapped subject>`` of a client certificate; ANONYMOUS without one. Raises
        TlsRefused when no mapping rule matches."""
        subject = peer_subject(ssl_object)
        if subject is None:
            return ANONYMOUS
        try:
            return KafkaPrincipal.user(map_name(self.settings.principal_rules, subject))
        except NoMatchingRule as exc:
            raise TlsRefused(str(exc)) from None
