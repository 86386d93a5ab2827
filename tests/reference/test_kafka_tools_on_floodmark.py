"""Apache Kafka's own command-line tools (4.1.1, from ``./dev kafka fetch``) against a floodmark
broker: each command run, its exit status and output checked, and what it did checked through
floodmark (issue 23, item 3).

Each tool is a JVM start (3-5 s on a quiet machine, far more on a loaded one), so the module is
``slow`` except one cheap round trip of kafka-topics. Run it with
``./dev test-slow tests/reference/test_kafka_tools_on_floodmark.py``.

One broker serves the module, with the StandardAuthorizer on and ``User:ANONYMOUS`` a super user,
so that kafka-acls has ACLs to write and read while every other tool is allowed everything.
Not served by floodmark, so not run: kafka-client-metrics.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import BrokerProcess
from tests.reference.kafka_node import missing_reason, run_tool

AUTHORIZER = ["--set", "authorizer.class.name="
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "--set", "super.users=User:ANONYMOUS"]
RECORDS = 30


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    b = BrokerProcess(tmp_path_factory.mktemp("tools") / "data", AUTHORIZER).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


def tool(name: str, *args: str, input_text: str | None = None) -> str:
    """Run Kafka's tool ``name``, assert it exits 0, return its stdout."""
    r = run_tool(name, list(args), timeout_s=300, input_text=input_text)
    assert r.returncode == 0, f"{name} {' '.join(args)}: exit {r.returncode}\n{r.stderr[-3000:]}"
    return r.stdout


def _produce(bootstrap: str, topic: str, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert p.flush(60) == 0


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return [tp.offset for tp in got]
    finally:
        c.close()


def test_kafka_topics_create_describe_alter_delete(bootstrap: str) -> None:
    """The one default-suite case: a topic's life through kafka-topics."""
    bs = ("--bootstrap-server", bootstrap)
    out = tool("kafka-topics", *bs, "--create", "--topic", "kt-life", "--partitions", "2",
               "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert "Created topic kt-life." in out
    out = tool("kafka-topics", *bs, "--describe", "--topic", "kt-life")
    assert "PartitionCount: 2" in out and "retention.ms=3600000" in out
    assert len(re.findall(r"Partition: \d+\tLeader: 1\tReplicas: 1\tIsr: 1", out)) == 2
    tool("kafka-topics", *bs, "--alter", "--topic", "kt-life", "--partitions", "3")
    assert "kt-life" in tool("kafka-topics", *bs, "--list").split()
    assert "PartitionCount: 3" in tool("kafka-topics", *bs, "--describe", "--topic", "kt-life")
    refused = run_tool("kafka-topics", [*bs, "--create", "--topic", "kt-life",
                                        "--partitions", "1"], timeout_s=300)
    assert refused.returncode != 0 and "already exists" in refused.stdout + refused.stderr
    tool("kafka-topics", *bs, "--delete", "--topic", "kt-life")
    deadline = time.monotonic() + 60
    while "kt-life" in tool("kafka-topics", *bs, "--list").split():
        assert time.monotonic() < deadline, "kt-life still listed a minute after its deletion"


@pytest.mark.slow
def test_kafka_configs_topics_brokers_and_the_cluster_default(bootstrap: str) -> None:
    bs = ("--bootstrap-server", bootstrap)
    tool("kafka-topics", *bs, "--create", "--topic", "kt-cfg", "--partitions", "1")
    tool("kafka-configs", *bs, "--alter", "--entity-type", "topics", "--entity-name", "kt-cfg",
         "--add-config", "retention.ms=7200000,cleanup.policy=[compact,delete]")
    out = tool("kafka-configs", *bs, "--describe", "--entity-type", "topics",
               "--entity-name", "kt-cfg")
    assert "retention.ms=7200000" in out and "cleanup.policy=compact,delete" in out
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=7200000" in out
    tool("kafka-configs", *bs, "--alter", "--entity-type", "topics", "--entity-name", "kt-cfg",
         "--delete-config", "retention.ms")
    out = tool("kafka-configs", *bs, "--describe", "--entity-type", "topics",
               "--entity-name", "kt-cfg")
    assert "retention.ms" not in out
    # A broker: every setting with --all; the cluster-wide default (--entity-default).
    out = tool("kafka-configs", *bs, "--describe", "--entity-type", "brokers",
               "--entity-name", "1", "--all")
    # log.retention.ms is unset (null) and log.retention.hours=168 applies, as in Kafka
    assert "log.retention.hours=168" in out and "log.retention.ms=null" in out
    assert "advertised.listeners=PLAINTEXT://" in out
    tool("kafka-configs", *bs, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.retention.ms=3600000")
    out = tool("kafka-configs", *bs, "--describe", "--entity-type", "brokers", "--entity-default")
    assert "log.retention.ms=3600000" in out and "DYNAMIC_DEFAULT_BROKER_CONFIG" in out
    tool("kafka-configs", *bs, "--alter", "--entity-type", "brokers", "--entity-default",
         "--delete-config", "log.retention.ms")
    # A read-only setting is refused with the reason.
    r = run_tool("kafka-configs", [*bs, "--alter", "--entity-type", "brokers", "--entity-name",
                                   "1", "--add-config", "node.id=7"], timeout_s=300)
    assert r.returncode != 0 and "node.id" in r.stdout + r.stderr
    # Users (SCRAM credentials) and clients (quotas).
    tool("kafka-configs", *bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
         "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    out = tool("kafka-configs", *bs, "--describe", "--entity-type", "users",
               "--entity-name", "alice")
    assert "SCRAM-SHA-256=iterations=8192" in out and "alice-secret" not in out
    tool("kafka-configs", *bs, "--alter", "--entity-type", "clients", "--entity-name", "app-1",
         "--add-config", "producer_byte_rate=1048576")
    out = tool("kafka-configs", *bs, "--describe", "--entity-type", "clients",
               "--entity-name", "app-1")
    assert "producer_byte_rate=1048576" in out


@pytest.mark.slow
def test_kafka_consumer_groups_describe_reset_and_delete_offsets(bootstrap: str) -> None:
    bs = ("--bootstrap-server", bootstrap)
    tool("kafka-topics", *bs, "--create", "--topic", "kt-groups", "--partitions", "2")
    _produce(bootstrap, "kt-groups", 2)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kt-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["kt-groups"])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < RECORDS and time.monotonic() < deadline:
        seen += len([m for m in c.consume(100, 1.0) if m.error() is None])
    assert seen == RECORDS
    c.commit(asynchronous=False)
    c.close()
    assert "kt-g" in tool("kafka-consumer-groups", *bs, "--list").split()
    out = tool("kafka-consumer-groups", *bs, "--describe", "--group", "kt-g")
    rows = [line.split() for line in out.splitlines() if line.startswith("kt-g ")]
    assert sorted((r[1], r[2], r[3], r[4], r[5]) for r in rows) == [
        ("kt-groups", "0", "15", "15", "0"), ("kt-groups", "1", "15", "15", "0")]
    # reset-offsets: the plan without --execute changes nothing; then each mode.
    out = tool("kafka-consumer-groups", *bs, "--group", "kt-g", "--reset-offsets",
               "--topic", "kt-groups", "--to-earliest", "--dry-run")
    assert "kt-groups" in out
    assert _committed(bootstrap, "kt-g", "kt-groups", 2) == [15, 15]
    for args, expected in ((["--to-earliest"], [0, 0]), (["--shift-by", "5"], [5, 5]),
                           (["--to-offset", "3"], [3, 3]), (["--to-latest"], [15, 15]),
                           (["--shift-by", "-20"], [0, 0]),
                           (["--to-datetime", "2000-01-01T00:00:00.000"], [0, 0])):
        tool("kafka-consumer-groups", *bs, "--group", "kt-g", "--reset-offsets",
             "--topic", "kt-groups", *args, "--execute")
        assert _committed(bootstrap, "kt-g", "kt-groups", 2) == expected, args
    tool("kafka-consumer-groups", *bs, "--group", "kt-g", "--reset-offsets",
         "--topic", "kt-groups:1", "--to-latest", "--execute")
    assert _committed(bootstrap, "kt-g", "kt-groups", 2) == [0, 15]
    out = tool("kafka-consumer-groups", *bs, "--delete-offsets", "--group", "kt-g",
               "--topic", "kt-groups")
    assert "kt-groups" in out
    assert _committed(bootstrap, "kt-g", "kt-groups", 2) == [-1001, -1001]
    tool("kafka-consumer-groups", *bs, "--delete", "--group", "kt-g")
    assert "kt-g" not in tool("kafka-consumer-groups", *bs, "--list").split()


@pytest.mark.slow
def test_console_producer_consumer_get_offsets_delete_records(bootstrap: str,
                                                              tmp_path: Path) -> None:
    bs = ("--bootstrap-server", bootstrap)
    tool("kafka-topics", *bs, "--create", "--topic", "kt-console", "--partitions", "1")
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    tool("kafka-console-producer", *bs, "--topic", "kt-console", "--property", "parse.key=true",
         "--property", "key.separator=:", input_text=lines)
    out = tool("kafka-console-consumer", *bs, "--topic", "kt-console", "--from-beginning",
               "--max-messages", "10", "--property", "print.key=true",
               "--property", "key.separator=:")
    assert out.split() == [f"k{i}:v{i}" for i in range(10)]
    assert tool("kafka-get-offsets", *bs, "--topic", "kt-console").split() == ["kt-console:0:10"]
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "kt-console", "partition": 0, "offset": 4}]}))
    out = tool("kafka-delete-records", *bs, "--offset-json-file", str(spec))
    assert "low_watermark: 4" in out
    assert tool("kafka-get-offsets", *bs, "--topic", "kt-console", "--time",
                "-2").split() == ["kt-console:0:4"]


@pytest.mark.slow
def test_log_dirs_leader_election_transactions_acls_api_versions(bootstrap: str) -> None:
    bs = ("--bootstrap-server", bootstrap)
    tool("kafka-topics", *bs, "--create", "--topic", "kt-misc", "--partitions", "2")
    out = tool("kafka-log-dirs", *bs, "--describe", "--topic-list", "kt-misc")
    report = json.loads(out.strip().splitlines()[-1])
    names = {p["partition"] for d in report["brokers"][0]["logDirs"] for p in d["partitions"]}
    assert names == {"kt-misc-0", "kt-misc-1"}
    out = tool("kafka-leader-election", *bs, "--election-type", "PREFERRED",
               "--topic", "kt-misc", "--partition", "0")
    assert "already elected" in out
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kt-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("kt-misc", b"x", partition=0)
    p.flush(30)
    out = tool("kafka-transactions", *bs, "list")
    assert "kt-txn" in out
    out = tool("kafka-transactions", *bs, "describe", "--transactional-id", "kt-txn")
    assert "Ongoing" in out and "kt-misc-0" in out
    p.commit_transaction(30)
    out = tool("kafka-transactions", *bs, "describe", "--transactional-id", "kt-txn")
    assert "CompleteCommit" in out
    tool("kafka-acls", *bs, "--add", "--allow-principal", "User:bob", "--operation", "Read",
         "--topic", "kt-misc")
    out = tool("kafka-acls", *bs, "--list", "--topic", "kt-misc")
    assert "principal=User:bob" in out and "operation=READ" in out
    tool("kafka-acls", *bs, "--remove", "--force", "--allow-principal", "User:bob",
         "--operation", "Read", "--topic", "kt-misc")
    assert "User:bob" not in tool("kafka-acls", *bs, "--list", "--topic", "kt-misc")
    out = tool("kafka-broker-api-versions", *bs)
    assert "Produce(0):" in out and "Fetch(1):" in out
    assert "Cluster ID:" in tool("kafka-cluster", "cluster-id", *bs)


def _table(out: str) -> list[dict[str, str]]:
    """Kafka's ``ToolsUtils.prettyPrintTable``: a header line, then rows, columns of spaces."""
    lines = [line.split() for line in out.strip().splitlines() if line.strip()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


@pytest.mark.slow
def test_kafka_transactions_describe_producers(bootstrap: str) -> None:
    """describe-producers (DescribeProducers, KIP-664): an idempotent producer's two records,
    then a transaction of three left open, on one partition; each producer's epoch, last
    sequence, last timestamp (the records' own) and the open transaction's first offset, as
    the partition's producer state holds them; after the commit, no transaction open and the
    coordinator epoch of the marker."""
    bs = ("--bootstrap-server", bootstrap)
    tool("kafka-topics", *bs, "--create", "--topic", "kt-prod", "--partitions", "2")
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(2):
        idem.produce("kt-prod", b"i", partition=0, timestamp=1_700_000_000_000 + i)
    assert idem.flush(60) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kt-prod-txn",
                    "linger.ms": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce("kt-prod", b"t", partition=0, timestamp=1_700_000_001_000 + i)
        txn.flush(30)  # one batch per record: the last sequence is 2
    rows = _table(tool("kafka-transactions", *bs, "describe-producers", "--topic", "kt-prod",
                       "--partition", "0"))
    assert len(rows) == 2, rows
    by_start = {r["CurrentTransactionStartOffset"]: r for r in rows}
    assert set(by_start) == {"None", "2"}, rows
    plain, open_txn = by_start["None"], by_start["2"]
    assert (plain["ProducerEpoch"], plain["LastSequence"], plain["LastTimestamp"],
            plain["LatestCoordinatorEpoch"]) == ("0", "1", "1700000000001", "-1")
    assert (open_txn["ProducerEpoch"], open_txn["LastSequence"],
            open_txn["LastTimestamp"]) == ("0", "2", "1700000001002")
    txn.commit_transaction(30)
    rows = _table(tool("kafka-transactions", *bs, "describe-producers", "--topic", "kt-prod",
                       "--partition", "0", "--broker-id", "1"))
    committed = next(r for r in rows if r["ProducerId"] == open_txn["ProducerId"])
    assert committed["CurrentTransactionStartOffset"] == "None"
    assert int(committed["LatestCoordinatorEpoch"]) >= 0
    # no producer wrote to partition 1 (an unknown topic the admin client retries on its
    # metadata until its timeout, against Kafka as here: tests/integration/test_describe_producers)
    assert _table(tool("kafka-transactions", *bs, "describe-producers", "--topic", "kt-prod",
                       "--partition", "1")) == []


@pytest.mark.slow
def test_kafka_metadata_quorum_describe_status_and_replication(bootstrap: str) -> None:
    """kafka-metadata-quorum reads DescribeQuorum through the broker: the lone broker is the
    metadata quorum's only voter and its leader, the high watermark its metadata log's end."""
    bs = ("--bootstrap-server", bootstrap)
    status = dict(line.split(":", 1) for line in tool(
        "kafka-metadata-quorum", *bs, "describe", "--status").splitlines() if ":" in line)
    leader = int(status["LeaderId"])
    assert int(status["HighWatermark"]) > 0 and int(status["MaxFollowerLag"]) == 0
    assert json.loads(status["CurrentVoters"]) == [{"id": leader}]
    assert json.loads(status["CurrentObservers"]) == []
    rows = [line.split() for line in tool("kafka-metadata-quorum", *bs, "describe",
                                          "--replication").splitlines()[1:] if line.strip()]
    assert [(int(r[0]), int(r[2]), r[-1]) for r in rows] == [
        (leader, int(status["HighWatermark"]), "Leader")]


@pytest.mark.slow
def test_kafka_features_describe_downgrade_upgrade(bootstrap: str) -> None:
    """kafka-features reads the finalized levels from ApiVersions and changes them with
    UpdateFeatures: a new floodmark cluster is at transaction.version 2, as Kafka 4.x's."""
    bs = ("--bootstrap-server", bootstrap)

    def described() -> str:
        out = tool("kafka-features", *bs, "describe")
        (line,) = [x for x in out.splitlines() if "Feature: transaction.version" in x]
        return line

    assert "FinalizedVersionLevel: 2" in described()
    assert "SupportedMaxVersion: 2" in described()
    refused = run_tool("kafka-features", [*bs, "upgrade", "--feature", "transaction.version=1"],
                       timeout_s=300)
    assert refused.returncode != 0  # an upgrade request may not lower a level
    assert "FinalizedVersionLevel: 2" in described()
    tool("kafka-features", *bs, "downgrade", "--feature", "transaction.version=0")
    assert "FinalizedVersionLevel: 0" in described() or "FinalizedVersionLevel: -" in described()
    tool("kafka-features", *bs, "upgrade", "--feature", "transaction.version=2")
    assert "FinalizedVersionLevel: 2" in described()
