"""A SASL listener's settings, read and checked once (Kafka's names).

``listener_sasl_settings`` gives a SASL_PLAINTEXT / SASL_SSL listener's ``SaslSettings``
(``listener.name.<l>.sasl.enabled.mechanisms``, else ``sasl.enabled.mechanisms``;
``connections.max.reauth.ms``; ``sasl.server.max.receive.size``) and refuses, with one
``ValueError`` line, what a broker must not start with: no mechanism, one floodmark does not
serve, PLAIN without TLS unless ``floodmark.unsafe.sasl.plain.without.tls=true``.
``plain_users`` reads PLAIN's users file (``floodmark.sasl.plain.users.file``);
``oauth_settings`` OAUTHBEARER's validator settings (``sasl.oauthbearer.*``).
"""

from __future__ import annotations

from collections.abc import Callable

from floodmark.security.sasl.oauthbearer import OAUTHBEARER, UNSECURED_SETTING, OAuthSettings
from floodmark.security.sasl.plain import (
    PLAIN,
    UNSAFE_SETTING,
    PlainUsers,
    listener_refusal,
    load_plain_users,
)
from floodmark.security.sasl.scram import SCRAM_MECHANISMS
from floodmark.security.sasl.session import SaslSettings

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
MECHANISMS = frozenset({PLAIN, OAUTHBEARER, *SCRAM_MECHANISMS})
USERS_FILE_SETTING = "floodmark.sasl.plain.users.file"
JWKS_URL_SETTING = "sasl.oauthbearer.jwks.endpoint.url"

Getter = Callable[[str], object]


def _bool(value: object) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


def enabled_mechanisms(get: Getter, listener: str) -> tuple[str, ...]:
    own = get(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms")
    text = own if own is not None else get("sasl.enabled.mechanisms")
    return tuple(m.strip().upper() for m in str(text or "").split(",") if m.strip())


def listener_sasl_settings(get: Getter, listener: str, security_protocol: str
                           ) -> SaslSettings | None:
    """The listener's SASL settings (None: not a SASL listener); ValueError, one line."""
    if security_protocol not in SASL_PROTOCOLS:
        return None
    mechanisms = enabled_mechanisms(get, listener)
    if not mechanisms:
        raise ValueError(f"listener {listener} ({security_protocol}) enables no SASL mechanism "
                         f"(sasl.enabled.mechanisms)")
    unknown = [m for m in mechanisms if m not in MECHANISMS]
    if unknown:
        raise ValueError(f"listener {listener}: SASL mechanism(s) {', '.join(unknown)} not "
                         f"served (floodmark serves {', '.join(sorted(MECHANISMS))})")
    if PLAIN in mechanisms:
        refusal = listener_refusal(listener, security_protocol, _bool(get(UNSAFE_SETTING)))
        if refusal is not None:
            raise ValueError(refusal)
        if not str(get(USERS_FILE_SETTING) or ""):
            raise ValueError(f"listener {listener} enables SASL mechanism PLAIN but "
                             f"{USERS_FILE_SETTING} names no users file")
    if OAUTHBEARER in mechanisms:
        oauth = oauth_settings(get)
        if not str(get(JWKS_URL_SETTING) or "") and not oauth.allow_unsecured:
            raise ValueError(f"listener {listener} enables SASL mechanism OAUTHBEARER but "
                             f"{JWKS_URL_SETTING} names no key set (unsecured tokens need "
                             f"{UNSECURED_SETTING}=true)")
    try:
        reauth_ms = int(str(get("connections.max.reauth.ms") or 0))
        max_receive = int(str(get("sasl.server.max.receive.size")))
    except ValueError:
        raise ValueError("connections.max.reauth.ms and sasl.server.max.receive.size are "
                         "numbers") from None
    if reauth_ms < 0 or max_receive < 64:
        raise ValueError("connections.max.reauth.ms must not be negative and "
                         "sasl.server.max.receive.size at least 64")
    return SaslSettings(mechanisms, reauth_ms, max_receive)


def plain_users(get: Getter) -> tuple[PlainUsers, str | None]:
    """PLAIN's users and a warning to log (or None); ValueError, one line, never a password."""
    path = str(get(USERS_FILE_SETTING) or "")
    try:
        return load_plain_users(path)
    except OSError as exc:
        raise ValueError(f"{USERS_FILE_SETTING}={path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{USERS_FILE_SETTING}={path}: not UTF-8 text") from None


def oauth_settings(get: Getter) -> OAuthSettings:
    """OAUTHBEARER's validator settings; ValueError, one line."""
    audience = tuple(a.strip() for a in str(get("sasl.oauthbearer.expected.audience") or "")
                     .split(",") if a.strip())
    try:
        skew_s = int(str(get("sasl.oauthbearer.clock.skew.seconds")))
    except ValueError:
        raise ValueError("sasl.oauthbearer.clock.skew.seconds is a number of seconds") from None
    if skew_s < 0:
        raise ValueError("sasl.oauthbearer.clock.skew.seconds must not be negative")
    sub = str(get("sasl.oauthbearer.sub.claim.name") or "").strip()
    if not sub:
        raise ValueError("sasl.oauthbearer.sub.claim.name must name a claim")
    return OAuthSettings(audience, str(get("sasl.oauthbearer.expected.issuer") or ""), sub,
                         str(get("sasl.oauthbearer.scope.claim.name") or "scope"),
                         skew_s * 1000, _bool(get(UNSECURED_SETTING)))
