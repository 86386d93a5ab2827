"""A secured local cluster (``floodmark cluster up --security MODE``): its certificates, each
node's security settings (Kafka's names, passed as ``--set``), and the client settings it
writes for users (``D/client.properties``, librdkafka's names).

``ssl``: every broker has two listeners, ``CLIENT`` (SSL, on the node's port: what ``bootstrap``
names; clients need only the CA) and ``INTERNAL`` (SSL with ``ssl.client.auth=required``: replica
fetching and transaction markers, ``inter.broker.listener.name``); the controller channel
(``controller.listener.names=CONTROLLER``) is SSL with client certificates required. Every node
holds a certificate of the cluster's throwaway CA (``D/tls``), so nodes authenticate each other
(mTLS); ``cluster`` commands use the ``admin`` certificate for the controller channel.

Extending: a mode is a ``Mode`` entry; ``sasl_ssl`` adds its SASL settings to the client
listener's protocol and to ``client_properties``.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from floodmark.security import certs
from floodmark.security.client_security import ClientSecurity
from floodmark.security.listeners import SecurityProtocol

TLS_DIR = "tls"
CLIENT_PROPERTIES = "client.properties"
ADMIN = "admin"


@dataclass(frozen=True)
class Mode:
    """A security mode of ``cluster up``: the client listener's protocol."""

    name: str
    client_protocol: SecurityProtocol


MODES: dict[str, Mode] = {"ssl": Mode("ssl", SecurityProtocol.SSL)}


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

    def prepare(self, node_ids: list[int]) -> None:
        """The CA, every node's certificate and the admin's (those missing: a restart or a
        grown cluster keeps what exists), and ``client.properties``."""
        ca, _ = certs.load_or_make_ca(self.directory)
        for name in [f"node-{n}" for n in node_ids] + [ADMIN]:
            if not self.node_files(name).keystore.exists():
                certs.issue_files(self.directory, name, ca, self.hosts)
        props = self.client_properties()
        path = self.data_dir / CLIENT_PROPERTIES
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        path.chmod(0o600)

    def client_properties(self) -> dict[str, str]:
        """What a client of the ``CLIENT`` listener needs (librdkafka's names)."""
        return {"security.protocol": self.mode.client_protocol.value,
                "ssl.ca.location": str(self.ca_path)}

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
