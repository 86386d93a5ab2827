"""SASL on the broker's SASL_PLAINTEXT / SASL_SSL listeners: the settings, the mechanisms'
server sides, and what happens to a connection that fails.

The rules live in ``floodmark.security.sasl`` (pure); this module gives each connection on a
SASL listener its ``SaslSession`` (``session_for``), with the listener's enabled mechanisms
(``listener.name.<l>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``), PLAIN's users
from ``floodmark.sasl.plain.users.file`` and SCRAM's credentials from the metadata image
(controller records, so a credential altered anywhere is in force on every broker once its
record is applied). ``check_listener`` refuses at start what must not run: an unknown
mechanism, PLAIN without TLS unless ``floodmark.unsafe.sasl.plain.without.tls=true``, PLAIN
without a users file. A failure is one log line (never a secret) and the connection closes
after ``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from floodmark.broker.boundary import ClientConnection
from floodmark.broker.config import BrokerConfig
from floodmark.controller.scram import Credentials
from floodmark.security.sasl.exchange import MechanismServer
from floodmark.security.sasl.plain import (
    PLAIN,
    UNSAFE_SETTING,
    PlainServer,
    PlainUsers,
    listener_refusal,
    load_plain_users,
)
from floodmark.security.sasl.scram import (
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramMechanism,
    ScramServer,
)
from floodmark.security.sasl.session import SaslSession, SaslSettings

log = logging.getLogger(__name__)

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
MECHANISMS = frozenset({PLAIN, *SCRAM_MECHANISMS})
USERS_FILE_SETTING = "floodmark.sasl.plain.users.file"


class Authentication:
    """The broker's SASL settings and mechanisms (one per broker)."""

    def __init__(self, config: BrokerConfig, credentials: Callable[[], Credentials]) -> None:
        self._config = config
        self._credentials = credentials
        self._plain: PlainUsers | None = None
        self._settings: dict[str, SaslSettings] = {}  # listener name -> its settings

    # -- start-up --------------------------------------------------------------------------
    def enabled_mechanisms(self, listener: str) -> tuple[str, ...]:
        own = self._config.get(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms")
        text = own if own is not None else self._config.get("sasl.enabled.mechanisms")
        return tuple(m.strip() for m in str(text or "").split(",") if m.strip())

    def check_listener(self, listener: str, security_protocol: str) -> None:
        """Load and check a SASL listener's settings; ValueError (one line) when the broker
        must not start with them. Other listeners are left alone."""
        if security_protocol not in SASL_PROTOCOLS:
            return
        mechanisms = self.enabled_mechanisms(listener)
        if not mechanisms:
            raise ValueError(f"listener {listener} ({security_protocol}) enables no SASL "
                             f"mechanism (sasl.enabled.mechanisms)")
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown:
            raise ValueError(f"listener {listener}: SASL mechanism(s) {', '.join(unknown)} not "
                             f"supported (supported: {', '.join(sorted(MECHANISMS))})")
        if PLAIN in mechanisms:
            refusal = listener_refusal(listener, security_protocol,
                                       self._config.get_bool(UNSAFE_SETTING))
            if refusal is not None:
                raise ValueError(refusal)
            self._load_plain_users(listener)
        self._settings[listener] = SaslSettings(
            mechanisms,
            max_reauth_ms=self._config.get_int("connections.max.reauth.ms"),
            max_receive_bytes=self._config.get_int("sasl.server.max.receive.size"))

    def _load_plain_users(self, listener: str) -> None:
        if self._plain is not None:
            return
        path = str(self._config.get(USERS_FILE_SETTING) or "")
        if not path:
            raise ValueError(f"listener {listener} enables SASL mechanism PLAIN but "
                             f"{USERS_FILE_SETTING} names no users file")
        try:
            self._plain, warning = load_plain_users(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{USERS_FILE_SETTING}={path}: {exc.__class__.__name__}: "
                             f"{getattr(exc, 'strerror', None) or 'unreadable'}") from None
        if warning is not None:
            log.warning("%s", warning)
        log.info("SASL/PLAIN: %d user(s) from %s", len(self._plain), path)

    # -- connections -----------------------------------------------------------------------
    def session_for(self, listener: str, security_protocol: str) -> SaslSession | None:
        """The authenticator of a new connection on ``listener`` (None: not a SASL one)."""
        if security_protocol not in SASL_PROTOCOLS:
            return None
        settings = self._settings.get(listener)
        if settings is None:  # a listener nobody checked: check it now (raises when bad)
            self.check_listener(listener, security_protocol)
            settings = self._settings[listener]
        return SaslSession(settings, self._mechanism_server)

    def _mechanism_server(self, mechanism: str) -> MechanismServer:
        if mechanism == PLAIN:
            assert self._plain is not None, "check_listener loaded the users of PLAIN"
            return PlainServer(self._plain)
        return ScramServer(ScramMechanism.parse(mechanism), self._scram_credential)

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials().get(user, {}).get(mechanism)

    def failed(self, conn: ClientConnection, why: str) -> None:
        """One line for the log, then the connection closes after
        ``connection.failed.authentication.delay.ms`` (requests meanwhile are dropped)."""
        delay_ms = self._config.get_int("connection.failed.authentication.delay.ms")
        log.warning("SASL authentication of %s on listener %s failed: %s; closing in %d ms",
                    conn.peer, conn.listener_name, why, delay_ms)
        asyncio.get_running_loop().call_later(delay_ms / 1000, conn.abort)
