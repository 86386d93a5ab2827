"""A secured local cluster (``floodmark cluster up --security MODE``): its certificates, each
node's security settings (Kafka's names, passed as ``--set``), and the client settings it
writes for users (``D/client.properties``, librdkafka's names).

``ssl``: every broker has two listeners, ``CLIENT`` (SSL, on the node's port: what ``bootstrap``
names; clients need only the CA) and ``INTERNAL`` (SSL with ``ssl.client.auth=required``: replica
fetching and transaction markers, ``inter.broker.listener.name``); the controller channel
(``controller.listener.names=CONTROLLER``) is SSL with client certificates required. Every node
holds a certificate of the cluster's throwaway CA (``D/tls``), so nodes authenticate each other
(mTLS); ``cluster`` commands use the ``admin`` certificate for the controller channel.

``sasl_ssl``: the same, but the ``CLIENT`` listener is SASL_SSL with SCRAM-SHA-512: clients
authenticate as a SCRAM user. ``cluster up`` makes the ``admin`` user (its password, random,
in ``D/tls/admin.password``, mode 0600, never on a command line) through the controller channel
with the admin certificate, once the controllers run, and ``D/client.properties`` carries its
SASL settings. The internal channels stay mTLS. It also sets the ACL authorizer (Kafka's
``StandardAuthorizer``): ``super.users`` are the admin (``User:admin``, the SCRAM user) and the
nodes (each node certificate's subject is mapped to ``User:floodmark-node`` on the ``INTERNAL``
listener, so a node added later is a super user to the nodes already running); every other user
may do only what ACLs grant (``floodmark acl add``).

Extending: a mode is a ``Mode`` entry.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from floodmark.cluster.layout import CLIENT_PROPERTIES
from floodmark.security import certs
from floodmark.security.client_security import ClientSecurity
from floodmark.security.listeners import SecurityProtocol
from floodmark.security.sasl.scram import DEFAULT_ITERATIONS, ScramMechanism, salted_password

TLS_DIR = "tls"
ADMIN = "admin"
NODE_PRINCIPAL = "floodmark-node"
"""The principal every node's certificate maps to on the ``INTERNAL`` listener (a super user)."""
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True)
class Mode:
    """A security mode of ``cluster up``: the client listener's protocol."""

    name: str
    client_protocol: SecurityProtocol
    sasl_mechanism: ScramMechanism | None = None
    """The client listener's SASL mechanism (its users are SCRAM users), None without SASL."""
    authorizer: bool = False
    """ACLs decide what each user may do (the admin and the nodes are super users)."""


MODES: dict[str, Mode] = {
    "ssl": Mode("ssl", SecurityProtocol.SSL),
    "sasl_ssl": Mode("sasl_ssl", SecurityProtocol.SASL_SSL, ScramMechanism.SCRAM_SHA_512,
                     authorizer=True),
}


@dataclass(frozen=True)
class ScramAdmin:
    """The SCRAM credential ``cluster up`` makes for the admin user: KIP-554's upsertion
    values (the password is salted here; the controller derives the keys)."""

    name: str
    mechanism: ScramMechanism
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # nothing secret in logs
        return f"ScramAdmin({self.name!r}, {self.mechanism.mechanism_name})"


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
        d = self.directory
        return certs.NodeFiles(d / f"{name}.keystore.pem", d / f"{name}.cert.pem",
                               d / f"{name}.key.pem")

    @property
    def admin_password_path(self) -> Path:
        return self.directory / f"{ADMIN}.password"

    def prepare(self, node_ids: list[int]) -> None:
        """The CA, every node's certificate and the admin's (those missing: a restart or a
        grown cluster keeps what exists), the admin's SCRAM password when the mode has SASL,
        and ``client.properties``."""
        ca, _ = certs.load_or_make_ca(self.directory)
        for name in [f"node-{n}" for n in node_ids] + [ADMIN]:
            if not self.node_files(name).keystore.exists():
                certs.issue_files(self.directory, name, ca, self.hosts)
        if self.mode.sasl_mechanism is not None and not self.admin_password_path.exists():
            fd = os.open(self.admin_password_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(24) + "\n")
        props = self.client_properties()
        path = self.data_dir / CLIENT_PROPERTIES
        path.touch(0o600)
        path.chmod(0o600)  # before the password goes in
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def client_properties(self) -> dict[str, str]:
        """What a client of the ``CLIENT`` listener needs (librdkafka's names)."""
        props = {"security.protocol": self.mode.client_protocol.value,
                 "ssl.ca.location": str(self.ca_path)}
        mechanism = self.mode.sasl_mechanism
        if mechanism is not None:
            props |= {"sasl.mechanisms": mechanism.mechanism_name, "sasl.username": ADMIN,
                      "sasl.password": self.admin_password_path.read_text().strip()}
        return props

    def scram_admin(self) -> ScramAdmin | None:
        """The admin's SCRAM credential to make (None: no SASL in this mode)."""
        mechanism = self.mode.sasl_mechanism
        if mechanism is None:
            return None
        salt = secrets.token_bytes(32)
        password = self.admin_password_path.read_text().strip()
        return ScramAdmin(ADMIN, mechanism, DEFAULT_ITERATIONS, salt,
                          salted_password(mechanism, password, salt, DEFAULT_ITERATIONS))

    def _node_ssl(self, node_id: int) -> dict[str, str]:
        return {"ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.node_files(f"node-{node_id}").keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca_path)}

    def broker_settings(self, node_id: int, listen_host: str, port: int) -> dict[str, str]:
        """A broker's (or combined node's) settings: the listeners, their protocols, its key
        and trust stores, client certificates required between nodes."""
        client = self.mode.client_protocol.value
        return {
            "listeners": f"CLIENT://{listen_host}:{port},INTERNAL://{listen_host}:0",
            "listener.security.protocol.map":
                f"CLIENT:{client},INTERNAL:SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "controller.listener.names": "CONTROLLER",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            **self._node_ssl(node_id),
            **({} if self.mode.sasl_mechanism is None else {
                "listener.name.client.sasl.enabled.mechanisms":
                    self.mode.sasl_mechanism.mechanism_name}),
            **(self.authorizer_settings() if self.mode.authorizer else {}),
        }

    @staticmethod
    def authorizer_settings() -> dict[str, str]:
        """The ACL authorizer, with the admin and the nodes as super users. A node's
        certificate (``CN=node-N,O=floodmark``) maps to ``User:floodmark-node`` on the
        ``INTERNAL`` listener only; any other certificate keeps its subject (not a super user)."""
        return {
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{ADMIN};User:{NODE_PRINCIPAL}",
            "listener.name.internal.ssl.principal.mapping.rules":
                f"RULE:^CN=node-[0-9]+,O=floodmark$/{NODE_PRINCIPAL}/,DEFAULT",
        }

    def controller_settings(self, node_id: int) -> dict[str, str]:
        return {"controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.client.auth": "required", **self._node_ssl(node_id)}

    def admin_channel(self) -> ClientSecurity:
        """How ``cluster`` commands call the controller: mTLS with the admin certificate."""
        admin = self.node_files(ADMIN)
        return ClientSecurity(SecurityProtocol.SSL, str(self.ca_path), str(admin.cert),
                              str(admin.key))
