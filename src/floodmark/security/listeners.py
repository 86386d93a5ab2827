"""Listeners: where a node accepts connections and how each one is secured, from Kafka's settings.

``listeners``                        ``NAME://HOST:PORT`` comma-separated; a port may be 0 (any
                                     free port; the bound one is advertised). An empty host is
                                     loopback (floodmark's safe default; Kafka's is the default
                                     interface), ``0.0.0.0`` every interface.
``advertised.listeners``             what clients and other brokers are told, per listener name;
                                     default: ``listeners``. Never ``0.0.0.0``; a listener left
                                     out is served but not advertised (as in Kafka).
``listener.security.protocol.map``   ``NAME:PROTOCOL`` pairs; given, it replaces Kafka's default
                                     (each protocol named after itself) whole.
``inter.broker.listener.name``       the listener brokers reach each other on (replica fetching,
                                     transaction markers); default: the listener named
                                     ``security.inter.broker.protocol`` (``PLAINTEXT``), or the
                                     only advertised listener. Only one of the two may be set.
``controller.listener.names``        the listener names the controller quorum is reached on; the
                                     first one's protocol secures the controller's RPC (its
                                     address comes from the controller's own flags). A listener
                                     of ``listeners`` named here is the controller's, not served
                                     by the broker, and never advertised to clients.

Every rule is here, pure: ``listener_config`` returns a ``ListenerConfig`` or raises
``ValueError`` with one line naming the setting. A node given none of these settings gets the one
PLAINTEXT listener it had always had (``ListenerConfig.single``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from floodmark.address import BadAddress, parse_host_port

LISTENERS = "listeners"
ADVERTISED_LISTENERS = "advertised.listeners"
PROTOCOL_MAP = "listener.security.protocol.map"
INTER_BROKER_LISTENER_NAME = "inter.broker.listener.name"
INTER_BROKER_PROTOCOL = "security.inter.broker.protocol"
CONTROLLER_LISTENER_NAMES = "controller.listener.names"
LISTENER_SETTINGS = (LISTENERS, ADVERTISED_LISTENERS, PROTOCOL_MAP, INTER_BROKER_LISTENER_NAME,
                     INTER_BROKER_PROTOCOL, CONTROLLER_LISTENER_NAMES)
"""The settings this module reads; a node that sets none of them is not opted in."""

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class SecurityProtocol(enum.Enum):
    """Kafka's ``SecurityProtocol``: whether a listener runs TLS, SASL, both or neither."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @classmethod
    def parse(cls, text: str, *, what: str) -> SecurityProtocol:
        try:
            return cls(text.strip().upper())
        except ValueError:
            known = ", ".join(p.value for p in cls)
            raise ValueError(f"{what}: unknown security protocol {text.strip()!r} "
                             f"(one of {known})") from None


DEFAULT_PROTOCOL_MAP: dict[str, SecurityProtocol] = {p.value: p for p in SecurityProtocol}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: its name (upper case, as Kafka normalises it), address and protocol."""

    name: str
    host: str
    port: int
    security_protocol: SecurityProtocol

    def with_port(self, port: int) -> Endpoint:
        return Endpoint(self.name, self.host, port, self.security_protocol)

    def to_record(self) -> dict[str, object]:
        """As a ``register_broker`` record lists it."""
        return {"name": self.name, "host": self.host, "port": self.port,
                "security_protocol": self.security_protocol.value}

    @classmethod
    def from_record(cls, obj: object) -> Endpoint:
        """One entry of a ``register_broker`` record's ``listeners``. ValueError: one line."""
        if not isinstance(obj, dict):
            raise ValueError(f"listener {obj!r} is not an object")
        name, host, port = obj.get("name"), obj.get("host"), obj.get("port")
        if not isinstance(name, str) or not _NAME.match(name) or not isinstance(host, str):
            raise ValueError(f"listener {obj!r} has no valid name and host")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port <= 65535:
            raise ValueError(f"listener {obj!r}: port is not a TCP port")
        protocol = SecurityProtocol.parse(str(obj.get("security_protocol")),
                                          what=f"listener {name}")
        return cls(name, host, port, protocol)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """A node's listeners, what it advertises for each, and which ones its peers use."""

    listeners: tuple[Endpoint, ...]
    """Every listener this node binds (the controller's ones excluded)."""
    advertised: tuple[Endpoint, ...]
    """What clients and brokers are told, one per listener name (host may be a wildcard only
    in ``single``'s case, where the broker's own fallback host applies)."""
    inter_broker_listener_name: str
    controller_listener_names: tuple[str, ...] = ()
    controller_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    """The protocol of the first controller listener: the controller RPC's."""
    explicit: bool = True
    """False for ``single``: the node set none of the listener settings."""

    @classmethod
    def single(cls, host: str, port: int) -> ListenerConfig:
        """The one PLAINTEXT listener of a node that did not opt in (as before listeners)."""
        ep = Endpoint("PLAINTEXT", host, port, SecurityProtocol.PLAINTEXT)
        return cls((ep,), (ep,), "PLAINTEXT", explicit=False)

    def listener(self, name: str) -> Endpoint:
        for ep in self.listeners:
            if ep.name == name:
                return ep
        raise KeyError(name)

    def advertised_for(self, name: str) -> Endpoint | None:
        for ep in self.advertised:
            if ep.name == name:
                return ep
        return None

    @property
    def inter_broker(self) -> Endpoint:
        """The advertised endpoint of the inter-broker listener."""
        ep = self.advertised_for(self.inter_broker_listener_name)
        if ep is None:  # listener_config refuses this
            raise KeyError(self.inter_broker_listener_name)
        return ep


Getter = Callable[[str], object]
"""A setting's value by Kafka's name (None: not set)."""


def _text(get: Getter, name: str) -> str | None:
    value = get(name)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def parse_protocol_map(text: str | None) -> dict[str, SecurityProtocol]:
    """``NAME:PROTOCOL,...`` (``listener.security.protocol.map``); None: Kafka's default."""
    if text is None:
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, SecurityProtocol] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name = name.strip().upper()
        if not sep or not _NAME.match(name):
            raise ValueError(f"{PROTOCOL_MAP}: {item!r} is not NAME:PROTOCOL")
        if name in out:
            raise ValueError(f"{PROTOCOL_MAP}: listener name {name} is mapped twice")
        out[name] = SecurityProtocol.parse(proto, what=f"{PROTOCOL_MAP} entry {item!r}")
    return out


def parse_endpoints(text: str, protocols: dict[str, SecurityProtocol], *,
                    setting: str) -> tuple[Endpoint, ...]:
    """``NAME://HOST:PORT,...``: each name in ``protocols``, no name twice, no port twice
    (port 0, any free port, excepted)."""
    out: list[Endpoint] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        name = name.strip().upper()
        if not sep or not _NAME.match(name):
            raise ValueError(f"{setting}: {item!r} is not NAME://HOST:PORT")
        if name not in protocols:
            raise ValueError(f"{setting}: listener name {name} is not in {PROTOCOL_MAP} "
                             f"({','.join(protocols)})")
        try:
            host, port = parse_host_port(address, what=f"{setting} entry {item!r}")
        except BadAddress as exc:
            raise ValueError(str(exc)) from None
        if address.strip().startswith(":"):
            host = ""  # no host given: the node's default (loopback; the fallback host)
        if any(ep.name == name for ep in out):
            raise ValueError(f"{setting}: listener name {name} appears twice")
        if port and any(ep.port == port for ep in out):
            raise ValueError(f"{setting}: port {port} is used by two listeners")
        out.append(Endpoint(name, host, port, protocols[name]))
    if not out:
        raise ValueError(f"{setting}: no listener given")
    return tuple(out)


def _names(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    return tuple(x.strip().upper() for x in text.split(",") if x.strip())


def listener_config(get: Getter, *, listen_host: str, listen_port: int,
                    advertised_host: str | None = None, advertised_port: int | None = None,
                    is_broker: bool = True) -> ListenerConfig:
    """A node's listeners from its settings (``get``), or the one PLAINTEXT listener of its
    ``--listen``/``--advertised`` flags when it sets none of them. ValueError: one line."""
    if all(_text(get, name) is None for name in LISTENER_SETTINGS):
        single = ListenerConfig.single(listen_host, listen_port)
        if advertised_host is None and advertised_port is None:
            return single
        adv = Endpoint("PLAINTEXT", advertised_host or listen_host,
                       advertised_port or listen_port, SecurityProtocol.PLAINTEXT)
        return ListenerConfig(single.listeners, (adv,), "PLAINTEXT", explicit=False)
    protocols = parse_protocol_map(_text(get, PROTOCOL_MAP))
    controller_names = _names(_text(get, CONTROLLER_LISTENER_NAMES))
    for name in controller_names:
        if name not in protocols:
            raise ValueError(f"{CONTROLLER_LISTENER_NAMES}: listener name {name} is not in "
                             f"{PROTOCOL_MAP} ({','.join(protocols)})")
    listeners_text = _text(get, LISTENERS)
    if listeners_text is None:
        listeners_text = f"PLAINTEXT://{listen_host}:{listen_port}"
        if "PLAINTEXT" not in protocols:
            raise ValueError(f"{LISTENERS} is not set and {PROTOCOL_MAP} has no PLAINTEXT "
                             "listener for the default one")
    every = parse_endpoints(listeners_text, protocols, setting=LISTENERS)
    served = tuple(ep for ep in every if ep.name not in controller_names)
    if is_broker and not served:
        raise ValueError(f"{LISTENERS}: every listener is a controller listener "
                         f"({CONTROLLER_LISTENER_NAMES}); a broker needs one for clients")
    adv_text = _text(get, ADVERTISED_LISTENERS)
    if adv_text is None:
        advertised = served
    else:
        advertised = parse_endpoints(adv_text, protocols, setting=ADVERTISED_LISTENERS)
        served_names = {ep.name for ep in served}
        for ep in advertised:
            if ep.name in controller_names:
                raise ValueError(f"{ADVERTISED_LISTENERS}: {ep.name} is a controller listener "
                                 f"({CONTROLLER_LISTENER_NAMES}); brokers do not advertise it")
            if ep.name not in served_names:
                raise ValueError(f"{ADVERTISED_LISTENERS}: {ep.name} is not one of "
                                 f"{LISTENERS} ({','.join(sorted(served_names))})")
            if ep.host in ("0.0.0.0", "::"):
                raise ValueError(f"{ADVERTISED_LISTENERS}: {ep.name} advertises {ep.host}, "
                                 "which no client can connect to")
    if advertised_host is not None:  # --advertised-host: every listener's default host
        advertised = tuple(ep if ep.host not in WILDCARD_HOSTS else
                           Endpoint(ep.name, advertised_host, ep.port, ep.security_protocol)
                           for ep in advertised)
    inter_name = _text(get, INTER_BROKER_LISTENER_NAME)
    inter_protocol = _text(get, INTER_BROKER_PROTOCOL)
    if inter_name is not None and inter_protocol is not None:
        raise ValueError(f"only one of {INTER_BROKER_LISTENER_NAME} and {INTER_BROKER_PROTOCOL} "
                         "may be set")
    if inter_name is None:
        inter_name = (SecurityProtocol.parse(inter_protocol, what=INTER_BROKER_PROTOCOL).value
                      if inter_protocol is not None else SecurityProtocol.PLAINTEXT.value)
        if is_broker and inter_name not in {ep.name for ep in advertised}:
            # Kafka's default names a PLAINTEXT listener; a node without one must say which.
            if len(advertised) == 1 and inter_protocol is None:
                inter_name = advertised[0].name
            else:
                raise ValueError(f"{INTER_BROKER_LISTENER_NAME} is not set and no listener is "
                                 f"named {inter_name}: name the one brokers reach each other on")
    inter_name = inter_name.upper()
    if inter_name in controller_names:
        raise ValueError(f"{INTER_BROKER_LISTENER_NAME}={inter_name} is a controller listener "
                         f"({CONTROLLER_LISTENER_NAMES})")
    if is_broker and inter_name not in {ep.name for ep in advertised}:
        raise ValueError(f"{INTER_BROKER_LISTENER_NAME}={inter_name} is not one of "
                         f"{ADVERTISED_LISTENERS} ({','.join(ep.name for ep in advertised)})")
    controller_protocol = (protocols[controller_names[0]] if controller_names
                           else SecurityProtocol.PLAINTEXT)
    return ListenerConfig(served, advertised, inter_name, controller_names, controller_protocol)
