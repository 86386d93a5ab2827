"""SCRAM credentials are controller metadata (KIP-554): made through a broker (forwarded to the
controller process), they are still there after the controller and the broker are killed and
restarted, and the password is written nowhere."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from floodmark.cluster.local import CONTROLLER_ID
from tests.cluster.helpers import start_cluster, wait_until


def _described(bootstrap: str) -> dict[str, list[tuple[int, int]]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, list[tuple[int, int]]] = {}
    every = admin.describe_user_scram_credentials().result(20)  # None: every user, one future
    for user, desc in every.items():
        out[user] = sorted((int(i.mechanism.value), int(i.iterations))
                           for i in desc.scram_credential_infos)
    return out


def _all_bytes(root: Path) -> bytes:
    """Every file of the cluster: metadata logs, snapshots, partition logs, process logs."""
    return b"".join((Path(d) / name).read_bytes()
                    for d, _dirs, files in os.walk(root) for name in files)


def test_credentials_survive_controller_and_broker_restarts(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", brokers=1)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", sha256, b"alice-pw-7731"),
            UserScramCredentialUpsertion("alice", sha512, b"alice-pw-7731"),
            UserScramCredentialUpsertion("bob", sha512, b"bob-pw-7731")])
        for f in futures.values():
            f.result(30)
        admin.alter_user_scram_credentials([
            UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)])["bob"].result(30)
        want = {"alice": [(1, 4096), (2, 8192)]}
        assert _described(cluster.bootstrap) == want
        for node in (CONTROLLER_ID, *cluster.broker_ids):
            cluster.kill(node)
        for node in (CONTROLLER_ID, *cluster.broker_ids):
            cluster.start_node(node)

        def recovered() -> bool:
            try:
                return _described(cluster.bootstrap) == want
            except Exception:
                return False

        wait_until(recovered, 60, "the credentials after restarts")
        data = _all_bytes(tmp_path / "c")
        assert b"alice-pw-7731" not in data and b"bob-pw-7731" not in data
    finally:
        cluster.stop()
