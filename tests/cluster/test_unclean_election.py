"""The unclean-election trade-off, for real (kafka-python, acks=all, min.insync.replicas=1).

Both followers die, the leader alone commits more records (ISR = {leader}), then the leader
dies too and a stale follower comes back:

* ``unclean.leader.election.enable=false``: no leader (the dead leader is the only eligible
  replica: KIP-966's ELR); writes fail until that broker returns; then everything acknowledged
  is there (a SIGKILL keeps the kernel's page cache; after a power cut see
  test_power_loss_last_isr_member.py).
* ``unclean.leader.election.enable=true``: the stale follower is elected at once and takes
  writes; the records only the old leader had are lost, and ``lost_offsets`` (reading both
  replicas' segment files) reports exactly those acknowledged offsets. When the old leader
  returns it truncates to the new leader's log (divergence by leader epoch).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError as KafkaPythonError

from floodmark.cluster.diff import lost_offsets
from tests.cluster.helpers import healed, replica_values, start_cluster, wait_until

pytestmark = pytest.mark.integration

TOPIC = "unclean"


def _send(producer: KafkaProducer, values: list[bytes], timeout_s: float) -> list[int]:
    futures = [producer.send(TOPIC, value=v, partition=0) for v in values]
    return [f.get(timeout=timeout_s).offset for f in futures]


def _producer(bootstrap: str) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=5, enable_idempotence=False,
                         request_timeout_ms=3000, metadata_max_age_ms=500,
                         retry_backoff_ms=100, reconnect_backoff_ms=50, linger_ms=2)


@pytest.mark.parametrize("unclean", [False, True], ids=["clean-only", "unclean"])
def test_unclean_election_trade_off(tmp_path: Path, unclean: bool) -> None:
    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    producer = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={
            "min.insync.replicas": "1",
            "unclean.leader.election.enable": str(unclean).lower()})])
        admin.close()
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 10, "a leader")
        producer = _producer(cluster.bootstrap)
        first = _send(producer, [b"a%d" % i for i in range(50)], 20)
        leader = cluster.leader_of(TOPIC)
        stale, other = [b for b in cluster.broker_ids if b != leader]
        cluster.kill(stale, signal.SIGKILL)
        cluster.kill(other, signal.SIGKILL)
        wait_until(lambda: (cluster.partition_registration(TOPIC) or {}).get("isr") == [leader],
                   15, "ISR = {leader}")
        only_leader = _send(producer, [b"b%d" % i for i in range(30)], 20)
        cluster.kill(leader, signal.SIGKILL)
        cluster.start_node(stale)

        if not unclean:
            wait_until(lambda: cluster.leader_of(TOPIC) == -1, 15, "the leader fenced")
            reg = cluster.partition_registration(TOPIC)
            # KIP-966 (on by default): the fenced last member leaves the ISR for the ELR, and
            # the partition waits for it (Kafka without ELR keeps it as the ISR: the same wait).
            assert reg is not None and reg["leader"] == -1 and reg["isr"] == []
            assert reg["elr"] == [leader], reg
            with pytest.raises(KafkaPythonError):
                _send(producer, [b"c-refused"], 8)
            assert cluster.leader_of(TOPIC) == -1, "a stale replica was elected"
            cluster.start_node(leader)
            wait_until(lambda: cluster.leader_of(TOPIC) == leader, 15, "old leader back")
            later = _send(producer, [b"c%d" % i for i in range(10)], 30)
            cluster.start_node(other)
            wait_until(lambda: healed(cluster, TOPIC), 45, "healed", 0.3)
            values = replica_values(cluster, leader, TOPIC)
            for i, off in enumerate(first):
                assert values[off] == b"a%d" % i
            for i, off in enumerate(only_leader):
                assert values[off] == b"b%d" % i, "clean election lost an acknowledged record"
            assert later[0] > max(only_leader)
        else:
            wait_until(lambda: cluster.leader_of(TOPIC) == stale, 15, "unclean leader")
            # kafka-python only knows the brokers of its last metadata answer, which (as in Kafka)
            # lists live brokers only: that was the old leader alone, now dead, so this client
            # cannot find the restarted broker. A new client bootstraps from every address.
            producer.close(timeout=2)
            producer = _producer(cluster.bootstrap)
            after = _send(producer, [b"c%d" % i for i in range(10)], 30)
            assert after[0] == max(first) + 1, "the new leader continues from its own log"
            lost = lost_offsets(cluster.partition_dir(leader, TOPIC),
                                cluster.partition_dir(stale, TOPIC), max(only_leader) + 1)
            assert lost == sorted(only_leader), lost
            diff = subprocess.run(
                [sys.executable, "-m", "floodmark.cli", "cluster", "diff", TOPIC, str(leader),
                 str(stale), "--data-dir", str(cluster.data_dir)],
                capture_output=True, text=True, timeout=60)
            assert diff.returncode == 3, diff.stderr
            assert f"offsets {min(only_leader)}-{max(only_leader)}" in diff.stdout, diff.stdout
            cluster.start_node(leader)
            cluster.start_node(other)
            wait_until(lambda: healed(cluster, TOPIC), 45, "healed", 0.3)
            values = replica_values(cluster, leader, TOPIC)
            for i, off in enumerate(after):
                assert values[off] == b"c%d" % i, "old leader did not truncate to the new log"
            st = cluster.controller_status()
            assert st is not None and st["unclean_elections"] >= 1
    finally:
        if producer is not None:
            producer.close(timeout=2)
        cluster.stop()


def test_an_operator_elects_a_stale_replica_for_a_leaderless_partition(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``unclean.leader.election.enable=false`` left the partition without a leader (its last
    ISR member is dead, a stale replica is alive): ``floodmark cluster elect-leaders
    --election-type unclean`` (kafka-leader-election.sh's UNCLEAN) makes the stale replica the
    leader, as the operator asked, and writes are taken again from its log end."""
    from floodmark.cli.main import main

    cluster = start_cluster(tmp_path / "c", **{"auto.leader.rebalance.enable": "false"})
    producer = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={
            "min.insync.replicas": "1", "unclean.leader.election.enable": "false"})])
        admin.close()
        wait_until(lambda: cluster.leader_of(TOPIC) > 0, 10, "a leader")
        producer = _producer(cluster.bootstrap)
        first = _send(producer, [b"a%d" % i for i in range(20)], 20)
        leader = cluster.leader_of(TOPIC)
        stale, other = [b for b in cluster.broker_ids if b != leader]
        cluster.kill(stale, signal.SIGKILL)
        cluster.kill(other, signal.SIGKILL)
        wait_until(lambda: (cluster.partition_registration(TOPIC) or {}).get("isr") == [leader],
                   15, "ISR = {leader}")
        _send(producer, [b"b%d" % i for i in range(10)], 20)
        cluster.kill(leader, signal.SIGKILL)
        cluster.start_node(stale)
        wait_until(lambda: cluster.leader_of(TOPIC) == -1, 15, "the leader fenced")
        assert cluster.leader_of(TOPIC) == -1  # the stale replica is not elected on its own

        capsys.readouterr()
        rc = main(["cluster", "elect-leaders", "--election-type", "unclean", "--topic", TOPIC,
                   "--partition", "0", "--bootstrap-server", cluster.bootstrap])
        out, err = capsys.readouterr()
        assert rc == 0 and "Traceback" not in err, err
        assert out.splitlines() == [
            f"Successfully completed leader election (UNCLEAN) for partitions {TOPIC}-0"], out
        wait_until(lambda: cluster.leader_of(TOPIC) == stale, 15, "the stale replica leads")
        producer.close(timeout=2)  # it knew only the dead leader (see above)
        producer = _producer(cluster.bootstrap)
        after = _send(producer, [b"c%d" % i for i in range(5)], 30)
        assert after[0] == max(first) + 1, "the new leader continues from its own log"
        st = cluster.controller_status()
        assert st is not None and st["unclean_elections"] >= 1
    finally:
        if producer is not None:
            producer.close(timeout=2)
        cluster.stop()
