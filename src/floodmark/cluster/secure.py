"""A secured local cluster (``floodmark cluster up --security MODE``): its certificates, each
node's security settings (Kafka's names, passed as ``--set``), and the client settings it
writes for users (``D/client.properties``, librdkafka's names).

``ssl``: every broker has two listeners, ``CLIENT`` (SSL, on the node's port: what ``bootstrap``
names; clients need only the CA) and ``INTERNAL`` (SSL with ``ssl.client.auth=required``: replica
fetching and transaction markers, ``inter.broker.listener.name``); the controller channel
(``controller.listener.names=CONTROLLER``) is SSL with client certificates required. Every node
holds a certificate of the cluster's throwaway CA (``D/tls``), so nodes authenticate each other
(mTLS); ``cluster`` commands use the ``admin`` certificate for the controller channel.

``sasl_ssl``: the ``CLIENT`` and ``INTERNAL`` listeners are SASL_SSL with SCRAM-SHA-512:
clients authenticate as a SCRAM user, and so do brokers to each other (replica fetching,
transaction markers) as the SCRAM user ``floodmark-node``
(``sasl.mechanism.inter.broker.protocol``), still with their node certificate on ``INTERNAL``
(``ssl.client.auth=required``: a node needs both). ``cluster up`` makes the ``admin`` and
``floodmark-node`` users (passwords random, in ``D/tls/<user>.password``, mode 0600, never on a
command line) through the controller channel with the admin certificate, once the controllers
run; ``D/client.properties`` carries the admin's SASL settings, and every broker reads its JAAS
entry (``listener.name.internal.scram-sha-512.sasl.jaas.config``) from
``D/tls/inter-broker.toml`` (0600, ``--config``). The controller channel stays mTLS (it takes no
SASL by design). It also sets the ACL authorizer (Kafka's ``StandardAuthorizer``): ``super.users``
are ``User:admin`` and ``User:floodmark-node``; every other user may do only what ACLs grant
(``floodmark acl add``).

Extending: a mode is a ``Mode`` entry.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from floodmark.cluster.layout import CLIENT_PROPERTIES
from floodmark.security import (
    DEFAULT_ITERATIONS,
    INTER_BROKER_MECHANISM,
    SCRAM_LOGIN_MODULE,
    ClientSecurity,
    ScramMechanism,
    SecurityProtocol,
    jaas_setting,
    salted_password,
)

if TYPE_CHECKING:
    from floodmark.security import certs

TLS_DIR = "tls"
ADMIN = "admin"
NODE_USER = "floodmark-node"
"""The SCRAM user every broker logs in to the others as (``sasl_ssl``; a super user)."""
INTER_BROKER_CONFIG = "inter-broker.toml"
"""The brokers' settings file (under ``D/tls``, 0600) holding their JAAS entry."""
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
INTERNAL = "INTERNAL"
"""The inter-broker listener's name."""


@dataclass(frozen=True)
class Mode:
    """A security mode of ``cluster up``: the client listener's protocol."""

    name: str
    client_protocol: SecurityProtocol
    sasl_mechanism: ScramMechanism | None = None
    """The client listener's SASL mechanism (its users are SCRAM users), None without SASL."""
    authorizer: bool = False
    """ACLs decide what each user may do (the admin and the nodes are super users)."""
    inter_broker_sasl: bool = False
    """The ``INTERNAL`` listener is SASL_SSL too: brokers log in as ``NODE_USER`` with
    ``sasl_mechanism`` (and their certificates)."""


MODES: dict[str, Mode] = {
    "ssl": Mode("ssl", SecurityProtocol.SSL),
    "sasl_ssl": Mode("sasl_ssl", SecurityProtocol.SASL_SSL, ScramMechanism.SCRAM_SHA_512,
                     authorizer=True, inter_broker_sasl=True),
}


@dataclass(frozen=True)
class ScramUser:
    """A SCRAM credential ``cluster up`` makes (the admin, the nodes): KIP-554's upsertion
    values (the password is salted here; the controller derives the keys)."""

    name: str
    mechanism: ScramMechanism
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # nothing secret in logs
        return f"ScramUser({self.name!r}, {self.mechanism.mechanism_name})"


@dataclass(frozen=True)
class ClusterSecurity:
    mode: Mode
    data_dir: Path
    hosts: tuple[str, ...]
    """Names the nodes' certificates are good for (listen and advertised hosts, loopback)."""

    @classmethod
    def of(cls, mode: str, data_dir: Path, listen_host: str,
           advertised_host: str) -> ClusterSecurity:
        if mode not in MODES:
            raise ValueError(f"--security {mode}: one of {', '.join(MODES)}")
        hosts = {"127.0.0.1", "localhost", listen_host, advertised_host}
        if listen_host in ("0.0.0.0", "::", ""):
            hosts.add(socket.gethostname())
        hosts -= {"0.0.0.0", "::", ""}
        return cls(MODES[mode], data_dir, tuple(sorted(hosts)))

    @property
    def directory(self) -> Path:
        return self.data_dir / TLS_DIR

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.pem"

    def node_files(self, name: str) -> certs.NodeFiles:
        # certs loads the cryptography package (~0.17 s of CPU): only where certificates are
        # made or named, not in every `floodmark cluster` command and chaos run that imports us
        from floodmark.security import certs

        d = self.directory
        return certs.NodeFiles(d / f"{name}.keystore.pem", d / f"{name}.cert.pem",
                               d / f"{name}.key.pem")

    def password_path(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    @property
    def admin_password_path(self) -> Path:
        return self.password_path(ADMIN)

    @property
    def inter_broker_config_path(self) -> Path:
        """The brokers' ``--config`` file (their JAAS entry, 0600)."""
        return self.directory / INTER_BROKER_CONFIG

    @property
    def scram_user_names(self) -> tuple[str, ...]:
        """The SCRAM users this mode makes (none without SASL)."""
        if self.mode.sasl_mechanism is None:
            return ()
        return (ADMIN, NODE_USER) if self.mode.inter_broker_sasl else (ADMIN,)

    def prepare(self, node_ids: list[int]) -> None:
        """The CA, every node's certificate and the admin's (those missing: a restart or a
        grown cluster keeps what exists), the SCRAM users' passwords when the mode has SASL,
        the brokers' JAAS file when they log in to each other, and ``client.properties``."""
        from floodmark.security import certs

        ca, _ = certs.load_or_make_ca(self.directory)
        for name in [f"node-{n}" for n in node_ids] + [ADMIN]:
            if not self.node_files(name).keystore.exists():
                certs.issue_files(self.directory, name, ca, self.hosts)
        for user in self.scram_user_names:
            path = self.password_path(user)
            if not path.exists():
                _write_private(path, secrets.token_urlsafe(24) + "\n", exclusive=True)
        jaas = self.inter_broker_jaas()
        if jaas is not None:
            name, text = jaas
            # TOML basic string: the JAAS text's quotes and backslashes escaped
            quoted = text.replace("\\", "\\\\").replace('"', '\\"')
            _write_private(self.inter_broker_config_path, f'"{name}" = "{quoted}"\n')
        props = self.client_properties()
        _write_private(self.data_dir / CLIENT_PROPERTIES,
                       "".join(f"{k}={v}\n" for k, v in props.items()))

    def inter_broker_jaas(self) -> tuple[str, str] | None:
        """The brokers' JAAS setting (Kafka's name) and text (holding ``NODE_USER``'s
        password); None when brokers do not log in to each other with SASL."""
        mechanism = self.mode.sasl_mechanism
        if mechanism is None or not self.mode.inter_broker_sasl:
            return None
        password = self.password_path(NODE_USER).read_text().strip()
        # token_urlsafe: letters, digits, '-' and '_' only, nothing to escape in JAAS
        text = (f'{SCRAM_LOGIN_MODULE} required username="{NODE_USER}" '
                f'password="{password}";')
        return jaas_setting(INTERNAL, mechanism.mechanism_name), text

    def client_properties(self) -> dict[str, str]:
        """What a client of the ``CLIENT`` listener needs (librdkafka's names)."""
        props = {"security.protocol": self.mode.client_protocol.value,
                 "ssl.ca.location": str(self.ca_path)}
        mechanism = self.mode.sasl_mechanism
        if mechanism is not None:
            props |= {"sasl.mechanisms": mechanism.mechanism_name, "sasl.username": ADMIN,
                      "sasl.password": self.admin_password_path.read_text().strip()}
        return props

    def scram_users(self) -> list[ScramUser]:
        """The SCRAM credentials to make (the admin's, the nodes' user's; none without
        SASL), each with a new salt."""
        mechanism = self.mode.sasl_mechanism
        if mechanism is None:
            return []
        out = []
        for user in self.scram_user_names:
            salt = secrets.token_bytes(32)
            password = self.password_path(user).read_text().strip()
            out.append(ScramUser(user, mechanism, DEFAULT_ITERATIONS, salt,
                                 salted_password(mechanism, password, salt,
                                                 DEFAULT_ITERATIONS)))
        return out

    def _node_ssl(self, node_id: int) -> dict[str, str]:
        return {"ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.node_files(f"node-{node_id}").keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca_path)}

    def broker_settings(self, node_id: int, listen_host: str, port: int) -> dict[str, str]:
        """A broker's (or combined node's) settings: the listeners, their protocols, its key
        and trust stores, client certificates required between nodes; with inter-broker SASL
        the mechanism (the JAAS entry is in ``inter_broker_config_path``, not here: these
        become command-line flags)."""
        client = self.mode.client_protocol.value
        mechanism = self.mode.sasl_mechanism
        internal = SecurityProtocol.SASL_SSL if self.mode.inter_broker_sasl else \
            SecurityProtocol.SSL
        sasl: dict[str, str] = {}
        if mechanism is not None:
            sasl["listener.name.client.sasl.enabled.mechanisms"] = mechanism.mechanism_name
            if self.mode.inter_broker_sasl:
                sasl |= {"listener.name.internal.sasl.enabled.mechanisms":
                         mechanism.mechanism_name,
                         INTER_BROKER_MECHANISM: mechanism.mechanism_name}
        return {
            "listeners": f"CLIENT://{listen_host}:{port},{INTERNAL}://{listen_host}:0",
            "listener.security.protocol.map":
                f"CLIENT:{client},{INTERNAL}:{internal.value},CONTROLLER:SSL",
            "inter.broker.listener.name": INTERNAL,
            "controller.listener.names": "CONTROLLER",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            **self._node_ssl(node_id),
            **sasl,
            **(self.authorizer_settings() if self.mode.authorizer else {}),
        }

    def broker_config_file(self) -> Path | None:
        """The file every broker reads its secret settings from (``--config``), None when
        there is none."""
        return self.inter_broker_config_path if self.mode.inter_broker_sasl else None

    def authorizer_settings(self) -> dict[str, str]:
        """The ACL authorizer, with the admin and the nodes as super users. With inter-broker
        SASL the nodes are the SCRAM user ``NODE_USER``; without it (an authorizer over mTLS
        between nodes), a node's certificate (``CN=node-N,O=floodmark``) maps to
        ``User:floodmark-node`` on the ``INTERNAL`` listener only, any other certificate
        keeping its subject (not a super user)."""
        settings = {"authorizer.class.name": AUTHORIZER,
                    "super.users": f"User:{ADMIN};User:{NODE_USER}"}
        if not self.mode.inter_broker_sasl:
            settings["listener.name.internal.ssl.principal.mapping.rules"] = (
                f"RULE:^CN=node-[0-9]+,O=floodmark$/{NODE_USER}/,DEFAULT")
        return settings

    def controller_settings(self, node_id: int) -> dict[str, str]:
        return {"controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.client.auth": "required", **self._node_ssl(node_id)}

    def admin_channel(self) -> ClientSecurity:
        """How ``cluster`` commands call the controller: mTLS with the admin certificate."""
        admin = self.node_files(ADMIN)
        return ClientSecurity(SecurityProtocol.SSL, str(self.ca_path), str(admin.cert),
                              str(admin.key))


def _write_private(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write ``text`` to ``path`` with mode 0600 from the first byte (it holds a password);
    ``exclusive``: only when the file is new."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # an older file of another mode
    with os.fdopen(fd, "w") as out:
        out.write(text)
