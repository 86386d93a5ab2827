"""SASL between brokers on real processes: 3-broker clusters whose inter-broker listener
``INTERNAL`` is SASL_SSL (SCRAM-SHA-512, then PLAIN), with the ACL authorizer on, so replica
fetching logs in as the brokers' own user (``listener.name.internal.<mechanism>.sasl.jaas.config``)
and holds ClusterAction only because that user is in ``super.users``. Replication works: RF=3,
acks=all, the leader killed, every record read back. In the PLAIN cluster two more brokers
follow a partition: one with a wrong inter-broker password, one whose user is not a super user
(no ClusterAction); neither can fetch, each says so in one line of its log (never the password),
and the others keep serving."""

from __future__ import annotations

import re
import secrets
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from floodmark.cluster import LocalCluster
from floodmark.controller import rpc, scram
from floodmark.errors import ErrorCode
from floodmark.security import certs
from floodmark.security.sasl.scram import ScramMechanism, salted_password
from tests.cluster.helpers import cluster_progress, wait_until

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
REFUSED = re.compile(r"from broker (\d+) refused: ")
"""A broker's line when another refused its login (``broker.peer_logins``)."""
CONTROLLER = {"broker.session.timeout.ms": "1500"}


def _tls(directory: Path) -> tuple[Path, Path]:
    """The CA and one key store (certificate for 127.0.0.1) every broker serves with."""
    ca, ca_path = certs.load_or_make_ca(directory)
    return ca_path, certs.issue_files(directory, "node", ca, ("127.0.0.1", "localhost")).keystore


def _settings(tmp: Path, mechanism: str, jaas: str, super_users: str,
              **extra: str) -> dict[str, str]:
    ca, keystore = _tls(tmp / "tls")
    return {
        "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": mechanism,
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.internal.{mechanism.lower()}.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": super_users,
        "replica.lag.time.max.ms": "2000", **extra}


def _client(cluster: LocalCluster, mechanism: str, password: str) -> dict[str, str]:
    ca = cluster.data_dir.parent / "tls" / "ca.pem"
    return {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": mechanism, "sasl.username": "admin", "sasl.password": password,
            "ssl.ca.location": str(ca)}


def _make_scram_users(cluster: LocalCluster, users: dict[str, str]) -> None:
    """SCRAM-SHA-512 users made through the controller (KIP-554's upsertions), as ``cluster
    up`` makes its admin: the brokers' client listeners take nothing but SCRAM."""
    mechanism = ScramMechanism.SCRAM_SHA_512
    ups = []
    for name, password in users.items():
        salt = secrets.token_bytes(32)
        ups.append(scram.Upsertion(name, int(mechanism), 4096, salt,
                                   salted_password(mechanism, password, salt, 4096)))
    args = scram.alterations_to_json([], ups)

    def made() -> bool:
        try:
            answer = rpc.blocking_call(cluster.controller_address, "alter_scram_credentials",
                                       args, 10.0, cluster.channel_security)
        except rpc.RpcError:
            return False
        result = answer.get("result")
        return isinstance(result, dict) and all(
            r.error is ErrorCode.NONE for r in scram.results_from_json(result["results"]))

    wait_until(made, 30, "the SCRAM users made", step_s=0.3,
               progress=lambda: cluster_progress(cluster))


def _produce(conf: dict[str, str], topic: str, keys: range) -> None:
    failed: list[str] = []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 120_000})
    for i in keys:
        p.produce(topic, key=str(i).encode(), value=b"v" * 256,
                  on_delivery=lambda e, _m: failed.append(str(e)) if e else None)
    assert p.flush(150) == 0 and not failed, failed[:3]


def _read_all(conf: dict[str, str], topic: str, count: int) -> list[int]:
    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[int] = []
    deadline = time.monotonic() + 120
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(int(msg.key()))
    finally:
        c.close()
    return got


def _isr(cluster: LocalCluster, topic: str) -> list[int]:
    reg = cluster.partition_registration(topic)
    return sorted(reg["isr"]) if reg and reg["leader"] > 0 else []


def _replication_survives_a_killed_leader(cluster: LocalCluster, conf: dict[str, str],
                                          replicas: list[int]) -> str:
    """RF=3 acks=all, the leader killed, acks=all again, everything read back; the topic."""
    topic = f"ib-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)  # held: a dropped client cancels its futures
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas],
                                  config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_until(lambda: _isr(cluster, topic) == sorted(replicas), 30, "full ISR",
               progress=lambda: cluster_progress(cluster))
    _produce(conf, topic, range(100))  # every follower fetched them (acks=all, full ISR)
    leader = cluster.leader_of(topic)
    cluster.kill(leader)
    wait_until(lambda: cluster.leader_of(topic) not in (-1, leader), 30, "a new leader",
               progress=lambda: cluster_progress(cluster))
    _produce(conf, topic, range(100, 200))
    assert _read_all(conf, topic, 200) == list(range(200))
    return topic


def _logs(cluster: LocalCluster) -> dict[int, str]:
    return {n: cluster.log_path(n).read_text(errors="replace") for n in cluster.node_ids
            if cluster.log_path(n).exists()}


def test_scram_sha_512_between_brokers(tmp_path: Path) -> None:
    broker_pw, admin_pw = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    jaas = f'{SCRAM_MODULE} required username="broker" password="{broker_pw}";'
    settings = _settings(tmp_path, "SCRAM-SHA-512", jaas, "User:admin;User:broker")
    cluster = LocalCluster(tmp_path / "cluster", 3, settings, CONTROLLER).start()
    try:
        # the brokers run before their user exists: their fetchers wait, then log in
        _make_scram_users(cluster, {"admin": admin_pw, "broker": broker_pw})
        _replication_survives_a_killed_leader(
            cluster, _client(cluster, "SCRAM-SHA-512", admin_pw), [1, 2, 3])
        for node, text in _logs(cluster).items():
            assert broker_pw not in text and admin_pw not in text, node
            assert not REFUSED.search(text) and "Traceback" not in text, (node, text[-2000:])
    finally:
        cluster.stop()


def test_plain_between_brokers_a_wrong_password_and_no_cluster_action(tmp_path: Path) -> None:
    admin_pw = secrets.token_urlsafe(12)
    users = tmp_path / "plain-users"
    # Every broker logs in as broker-N with pw-N-ok. The users file gives broker-4 another
    # password; broker-5 logs in but is no super user (no ClusterAction).
    users.write_text(f"admin:{admin_pw}\n" + "".join(
        f"broker-{n}:pw-{n}-{'right' if n == 4 else 'ok'}\n" for n in range(1, 6)))
    users.chmod(0o600)
    jaas = f'{PLAIN_MODULE} required username="broker-{{node_id}}" password="pw-{{node_id}}-ok";'
    settings = _settings(tmp_path, "PLAIN", jaas,
                         ";".join(["User:admin", *(f"User:broker-{n}" for n in range(1, 5))]),
                         **{"floodmark.sasl.plain.users.file": str(users)})
    cluster = LocalCluster(tmp_path / "cluster", 5, settings, CONTROLLER).start()
    try:
        conf = _client(cluster, "PLAIN", admin_pw)
        first = _replication_survives_a_killed_leader(cluster, conf, [1, 2, 3])
        live = [b for b in (1, 2, 3) if cluster.node_state(b) != "dead"]
        topic = f"ib-bad-{uuid.uuid4().hex[:6]}"
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[*live, 4, 5]],
                                      config={"min.insync.replicas": "2"})])[topic].result(60)
        # The others keep serving: acks=all completes once the leader drops brokers 4 and 5
        # from the ISR (replica.lag.time.max.ms), and both topics read back whole.
        _produce(conf, topic, range(100))
        assert _isr(cluster, topic) == sorted(live)
        assert _read_all(conf, topic, 100) == list(range(100))
        assert _read_all(conf, first, 200) == list(range(200))
        logs = _logs(cluster)
        for bad, reason in ((4, "SASL_AUTHENTICATION_FAILED"),
                            (5, "Fetch as replica: TOPIC_AUTHORIZATION_FAILED")):
            refused = [line for line in logs[bad].splitlines() if REFUSED.search(line)]
            assert refused, logs[bad][-3000:]
            leaders = [REFUSED.search(line).group(1) for line in refused]  # type: ignore[union-attr]
            assert len(leaders) == len(set(leaders)), refused  # one line a leader, not a try
            assert all(reason in line and f"broker-{bad}" in line for line in refused), refused
        # the leader's side: the refused tries of broker 4 (one a second) are one line a minute
        refusals = {n: t.count("user 'broker-4': wrong password") for n, t in logs.items()}
        assert sum(refusals.values()) >= 1 and max(refusals.values()) <= 2, refusals
        for node, text in logs.items():
            assert "pw-4-ok" not in text and "pw-4-right" not in text, node
            assert admin_pw not in text and "Traceback" not in text, (node, text[-2000:])
    finally:
        cluster.stop()
