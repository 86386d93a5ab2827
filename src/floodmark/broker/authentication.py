"""SASL on the broker's SASL_PLAINTEXT / SASL_SSL listeners: the settings, the mechanisms'
server sides, and what happens to a connection that fails.

The rules live in ``floodmark.security.sasl`` (pure); this module gives each connection on a
SASL listener its ``SaslSession`` (``session_for``), with the listener's enabled mechanisms
(``listener.name.<l>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``), PLAIN's users
from ``floodmark.sasl.plain.users.file``, OAUTHBEARER's trusted keys from
``sasl.oauthbearer.jwks.endpoint.url`` and SCRAM's credentials from the metadata image
(controller records, so a credential altered anywhere is in force on every broker once its
record is applied). ``check_listener`` refuses at start what must not run: an unknown
mechanism, PLAIN without TLS unless ``floodmark.unsafe.sasl.plain.without.tls=true``, PLAIN
without a users file. A failure is one log line (never a secret) and the connection closes
after ``connection.failed.authentication.delay.ms``; the same failure from the same host again
within a minute is counted into the next line rather than logged (``RepeatedFailures``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from floodmark.broker.boundary import ClientConnection
from floodmark.broker.config import BrokerConfig
from floodmark.controller import Credentials, Tokens
from floodmark.security import (
    JWKS_URL_SETTING,
    OAUTHBEARER,
    PLAIN,
    SECRET_SETTING,
    KafkaPrincipal,
    KeySet,
    MechanismServer,
    OAuthBearerServer,
    OAuthSettings,
    PlainServer,
    PlainUsers,
    SaslSession,
    SaslSettings,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    TokenCredentials,
    listener_sasl_settings,
    oauth_settings,
    plain_users,
)

log = logging.getLogger(__name__)


class Authentication:
    """The broker's SASL listeners and mechanisms (one per broker)."""

    def __init__(self, config: BrokerConfig, credentials: Callable[[], Credentials],
                 tokens: Callable[[], Tokens] = dict) -> None:
        """``tokens``: the delegation tokens of the metadata image (KIP-48)."""
        self._config = config
        self._credentials = credentials
        self._tokens = tokens
        secret = str(config.get(SECRET_SETTING) or "")
        self.token_credentials = TokenCredentials(secret) if secret else None
        """None: delegation tokens are off (``delegation.token.secret.key`` unset)."""
        self._plain: PlainUsers | None = None
        self._oauth: OAuthSettings | None = None
        self._key_set: KeySet | None = None
        self._settings: dict[str, SaslSettings] = {}  # SASL listener name -> its settings
        self._repeats = RepeatedFailures()
        for ep in config.listeners.listeners:
            self.check_listener(ep.name, ep.security_protocol.value)

    def check_listener(self, listener: str, security_protocol: str) -> None:
        """Read a listener's SASL settings (and PLAIN's users); ValueError (one line) when the
        broker must not start with them (``BrokerConfig.validate`` asks first)."""
        settings = listener_sasl_settings(self._config.get, listener, security_protocol)
        if settings is None:
            return
        if PLAIN in settings.enabled_mechanisms and self._plain is None:
            self._plain, warning = plain_users(self._config.get)
            if warning is not None:
                log.warning("%s", warning)
            log.info("SASL/PLAIN: %d user(s)", len(self._plain))
        if OAUTHBEARER in settings.enabled_mechanisms and self._oauth is None:
            self._oauth = oauth_settings(self._config.get)
            url = str(self._config.get(JWKS_URL_SETTING) or "")
            if url:
                self._key_set = KeySet(url, self._config.get_int(
                    "sasl.oauthbearer.jwks.endpoint.refresh.ms"))
                log.info("SASL/OAUTHBEARER: %d key(s) from %s", len(self._key_set.keys()), url)
            if self._oauth.allow_unsecured:
                log.warning("SASL/OAUTHBEARER accepts unsecured tokens (alg none): anyone can "
                            "claim any user name")
        self._settings[listener] = settings

    # -- connections -----------------------------------------------------------------------
    def session_for(self, listener: str, security_protocol: str) -> SaslSession | None:
        """The authenticator of a new connection on ``listener`` (None: not a SASL one)."""
        settings = self._settings.get(listener)
        if settings is None:
            return None
        return SaslSession(settings, self._mechanism_server)

    def _mechanism_server(self, mechanism: str) -> MechanismServer:
        if mechanism == PLAIN:
            assert self._plain is not None, "check_listener loaded the users of PLAIN"
            return PlainServer(self._plain)
        if mechanism == OAUTHBEARER:
            assert self._oauth is not None, "check_listener read OAUTHBEARER's settings"
            keys = self._key_set.keys() if self._key_set is not None else ()
            return OAuthBearerServer(keys, self._oauth, int(time.time() * 1000))
        return ScramServer(ScramMechanism.parse(mechanism), self._scram_credential,
                           token_lookup=self._token_credential)

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._credentials().get(user, {}).get(mechanism)

    def _token_credential(self, token_id: str, mechanism: ScramMechanism
                          ) -> tuple[ScramCredential, KafkaPrincipal] | None:
        """SCRAM with ``tokenauth=true``: the token's credential (its HMAC as the password)
        and its owner; None when tokens are off, the token unknown, or past its expiry or
        max time (refused before the controller's sweep removes it)."""
        token = self._tokens().get(token_id)
        if self.token_credentials is None or token is None or token.expired(
                int(time.time() * 1000)):
            return None
        return self.token_credentials.credential(token_id, mechanism), token.owner

    def failed(self, conn: ClientConnection, why: str) -> None:
        """One line for the log, then the connection closes after
        ``connection.failed.authentication.delay.ms`` once the answers written are sent
        (requests meanwhile are dropped)."""
        delay_ms = self._config.get_int("connection.failed.authentication.delay.ms")
        repeats = self._repeats.seen(conn.peer.rsplit(":", 1)[0], conn.listener_name, why)
        if repeats is not None:
            log.warning("SASL authentication of %s on listener %s failed: %s; closing in %d ms%s",
                        conn.peer, conn.listener_name, why, delay_ms,
                        f" ({repeats} more like it in the last {REPEAT_WINDOW_S:.0f} s, "
                        "not logged)" if repeats else "")
        # close, not abort: the failure's answer, already written, is sent first (Kafka sends
        # it, then closes the channel after the delay)
        asyncio.get_running_loop().call_later(delay_ms / 1000, conn.close)


REPEAT_WINDOW_S = 60.0
MAX_REPEAT_KEYS = 1024


class RepeatedFailures:
    """The same failure (host, listener, reason) again within ``REPEAT_WINDOW_S`` of its last
    logged line is counted, not logged: a broker retrying a wrong inter-broker password every
    second, or a client library's reconnect loop, is one line a minute that says how many it
    stands for, not one a try. At most ``MAX_REPEAT_KEYS`` failures are remembered (the
    oldest forgotten first), so many different user names cannot grow it without bound."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[tuple[str, str, str], tuple[float, int]] = {}

    def seen(self, host: str, listener: str, why: str) -> int | None:
        """None: do not log this one; else log it, with how many were not logged before it."""
        now = self._clock()
        key = (host, listener, why)
        last = self._last.get(key)
        if last is not None and now - last[0] < REPEAT_WINDOW_S:
            self._last[key] = (last[0], last[1] + 1)
            return None
        self._last.pop(key, None)
        if len(self._last) >= MAX_REPEAT_KEYS:
            del self._last[next(iter(self._last))]
        self._last[key] = (now, 0)
        return 0 if last is None else last[1]
