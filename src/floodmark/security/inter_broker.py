"""How a broker authenticates to other brokers when the inter-broker listener is SASL
(``SASL_PLAINTEXT`` / ``SASL_SSL``): the mechanism and credentials its replica fetchers and
transaction-marker senders log in with, from Kafka's settings.

``sasl.mechanism.inter.broker.protocol``  PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default,
                                          GSSAPI, is not served: a broker whose inter-broker
                                          listener is SASL must set it); it must be enabled on
                                          that listener (``sasl.enabled.mechanisms``)
``listener.name.<listener>.<mechanism>.sasl.jaas.config``
                                          the credentials, Kafka's JAAS text: ``PlainLoginModule
                                          required username="..." password="...";`` or the
                                          same with ``ScramLoginModule`` (``security.jaas``)

The principal the other brokers see is ``User:<username>``, subject to the authorizer like any
other: it needs ClusterAction on the cluster (replica Fetch, WriteTxnMarkers), so name it in
``super.users`` or grant it. Every mistake is one ``ValueError`` line at start that names the
setting and never shows the password. A broker that sets neither (the mechanism left at Kafka's
default, no JAAS entry) starts, and dials with no login: the other broker refuses it, and the
refusal (one line) names what to set. The controller channel does not take SASL
(``security.channel``): it is PLAINTEXT or mTLS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from floodmark.security.jaas import jaas_credentials
from floodmark.security.sasl.settings import enabled_mechanisms

INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
DEFAULT_MECHANISM = "GSSAPI"
"""Kafka's default for it, which floodmark does not serve: left at it, nothing is configured."""
CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""What a broker can log in with (floodmark's client speaks these)."""


@dataclass(frozen=True)
class InterBrokerSasl:
    mechanism: str
    username: str
    password: str = field(repr=False)

    @property
    def principal(self) -> str:
        return f"User:{self.username}"


def jaas_setting(listener: str, mechanism: str) -> str:
    """Kafka's per-listener, per-mechanism JAAS setting (both names in lower case)."""
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def inter_broker_sasl(get: Callable[[str], object], listener: str) -> InterBrokerSasl | None:
    """The SASL login of this broker on the inter-broker listener ``listener`` (a SASL one);
    None when none is configured at all (the mechanism left at Kafka's default and no JAAS
    entry for the listener: a lone broker whose one listener is SASL starts as before, and a
    peer's refusal then says what to set). ValueError: one line, never a secret."""
    mechanism = str(get(INTER_BROKER_MECHANISM) or DEFAULT_MECHANISM).strip().upper()
    if mechanism == DEFAULT_MECHANISM and not any(
            str(get(jaas_setting(listener, m)) or "").strip() for m in CLIENT_MECHANISMS):
        return None
    if mechanism not in CLIENT_MECHANISMS:
        raise ValueError(f"{INTER_BROKER_MECHANISM}={mechanism}: the inter-broker listener "
                         f"{listener} is SASL and brokers log in to each other with "
                         f"{', '.join(CLIENT_MECHANISMS)}")
    enabled = enabled_mechanisms(get, listener)
    if mechanism not in enabled:
        raise ValueError(f"{INTER_BROKER_MECHANISM}={mechanism} is not enabled on the "
                         f"inter-broker listener {listener} (it enables "
                         f"{', '.join(enabled) or 'none'}: sasl.enabled.mechanisms or "
                         f"listener.name.{listener.lower()}.sasl.enabled.mechanisms)")
    name = jaas_setting(listener, mechanism)
    text = get(name)
    if text is None or not str(text).strip():
        raise ValueError(f"{name} is not set: the inter-broker listener {listener} is SASL, "
                         f"and this broker logs in to the others with {mechanism}")
    username, password = jaas_credentials(str(text), mechanism, what=name)
    return InterBrokerSasl(mechanism, username, password)
