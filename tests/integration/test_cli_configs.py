"""``floodmark config describe|alter`` (kafka-configs.sh), ``topic describe --all-configs``,
``topic delete-records`` (kafka-delete-records.sh), ``cluster elect-leaders`` and ``cluster
log-dirs`` against a real broker process; the commands run in this process
(``floodmark.cli.main.main``, real sockets), checked against confluent-kafka where a real client
can see the effect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.integration.conftest import Run

pytestmark = pytest.mark.integration


@pytest.fixture
def fm(fm_in_process: Run) -> Run:
    """``fm(*argv) -> (exit status, stdout, stderr)`` (tests/integration/conftest.py)."""
    return fm_in_process


def one_error_line(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err


def topic_config_seen_by_confluent(bootstrap: str, topic: str) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {name: (entry.value, int(entry.source)) for name, entry in future.result(20).items()}


def test_config_topics_and_brokers(broker, fm: Run) -> None:
    assert fm("topic", "create", "cfg", "--config", "retention.ms=60000")[0] == 0
    entity = ["--entity-type", "topics", "--entity-name", "cfg"]
    rc, out, err = fm("config", "describe", *entity)
    assert rc == 0, err
    assert out.splitlines() == [
        "Dynamic configs for topic cfg are:",
        # log.retention.ms has no value of its own (log.retention.hours applies): no synonym
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}"]

    rc, out, err = fm("config", "alter", *entity, "--add-config",
                      "cleanup.policy=[compact,delete],segment.ms=100000")
    assert rc == 0 and out.strip() == "Completed updating config for topic cfg.", err
    rc, out, err = fm("config", "alter", *entity, "--delete-config", "retention.ms")
    assert rc == 0, err
    seen = topic_config_seen_by_confluent(broker.bootstrap, "cfg")  # a real client agrees
    assert seen["cleanup.policy"] == ("compact,delete", 1)  # DYNAMIC_TOPIC_CONFIG
    assert seen["segment.ms"] == ("100000", 1)
    assert seen["retention.ms"][1] != 1  # deleted: back to the broker's value

    # --all: every config, its source and synonyms, in JSON too.
    rc, out, err = fm("config", "describe", *entity, "--all", "--json")
    assert rc == 0, err
    (doc,) = json.loads(out)
    assert doc["entity_type"] == "topics" and doc["entity_name"] == "cfg"
    configs = {c["name"]: c for c in doc["configs"]}
    assert configs["segment.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["max.message.bytes"]["source"] == "DEFAULT_CONFIG"
    assert configs["max.message.bytes"]["synonyms"][0]["name"] == "message.max.bytes"
    assert len(configs) > 10

    # The cluster-wide broker default: a new source for every topic without its own value.
    default = ["--entity-type", "brokers", "--entity-default"]
    rc, out, err = fm("config", "alter", *default, "--add-config", "log.retention.ms=3600000")
    assert rc == 0, err
    assert out.strip() == "Completed updating default config for brokers in the cluster."
    try:
        rc, out, _err = fm("config", "describe", *default)
        assert out.splitlines() == [
            "Default configs for brokers in the cluster are:",
            "  log.retention.ms=3600000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
            # written by the controller, eligible leader replicas being on (as Kafka 4.1)
            "  min.insync.replicas=1 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}"]
        rc, out, _err = fm("config", "describe", *entity, "--all")
        assert ("  retention.ms=3600000 sensitive=false synonyms={"
                "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}") in out.splitlines()
        # Every broker, then the default (as kafka-configs.sh lists them).
        rc, out, _err = fm("config", "describe", "--entity-type", "brokers")
        assert out.splitlines()[0] == "Dynamic configs for broker 1 are:"
        assert "Default configs for brokers in the cluster are:" in out.splitlines()
    finally:
        assert fm("config", "alter", *default, "--delete-config", "log.retention.ms")[0] == 0
    rc, out, err = fm("config", "describe", "--entity-type", "brokers", "--entity-name", "1",
                      "--all")
    assert rc == 0 and "  log.retention.hours=168 sensitive=false synonyms={" in out, err
    assert "  log.retention.ms=None sensitive=false synonyms={}" in out.splitlines(), out

    # Mistakes: the broker's code and message in one line, exit 1; nothing changed.
    rc, _out, err = fm("config", "alter", *entity, "--add-config", "no.such.config=1")
    assert rc == 1
    one_error_line(err, "topic cfg", "INVALID_CONFIG (40)", "no.such.config")
    # a value floodmark's table refuses: refused before it is sent, in Kafka's words
    rc, _out, err = fm("config", "alter", "--entity-type", "brokers", "--entity-name", "1",
                       "--add-config", "log.segment.bytes=abc")
    assert rc == 1
    one_error_line(err, "Invalid value abc for configuration log.segment.bytes: Not a number "
                        "of type INT")
    # what only the broker decides (a read-only setting): its code and its message
    rc, _out, err = fm("config", "alter", "--entity-type", "brokers", "--entity-name", "1",
                       "--add-config", "log.retention.hours=1")
    assert rc == 1
    one_error_line(err, "broker 1", "INVALID_REQUEST (42)",
                   "Cannot update these configs dynamically: Set(log.retention.hours)")
    rc, _out, err = fm("config", "describe", "--entity-type", "topics", "--entity-name", "nope")
    assert rc == 1
    one_error_line(err, "UNKNOWN_TOPIC_OR_PARTITION (3)", "unknown topic 'nope'")
    for argv, needle in (
            (["describe", "--entity-type", "topics", "--entity-default"], "not supported"),
            (["describe", "--entity-type", "brokers", "--entity-name", "x"], "a number"),
            (["describe", "--entity-type", "brokers", "--entity-name", "9"], "not a live"),
            (["alter", *entity], "nothing to alter"),
            (["alter", "--entity-type", "topics", "--add-config", "a=1"], "--entity-name"),
            (["alter", *entity, "--add-config", "oops"], "not NAME=VALUE")):
        rc, _out, err = fm("config", *argv)
        assert rc == 1
        one_error_line(err, needle)
    assert topic_config_seen_by_confluent(broker.bootstrap, "cfg")["segment.ms"] == ("100000", 1)


def test_config_groups(broker, fm: Run) -> None:
    """``--entity-type groups`` (kafka-configs.sh's, Kafka 4): a group's own configs
    (ConfigResource GROUP), seen by confluent-kafka's admin client too."""
    entity = ["--entity-type", "groups", "--entity-name", "app"]
    rc, out, err = fm("config", "alter", *entity, "--add-config",
                      "share.auto.offset.reset=earliest,consumer.session.timeout.ms=50000")
    assert rc == 0 and out.strip() == "Completed updating config for group app.", err
    rc, out, err = fm("config", "describe", *entity)
    assert rc == 0, err
    assert out.splitlines() == [
        "Dynamic configs for group app are:",
        "  consumer.session.timeout.ms=50000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}",
        "  share.auto.offset.reset=earliest sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest}"]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, "app")]).values()
    seen = {name: (entry.value, int(entry.source)) for name, entry in future.result(20).items()}
    assert seen["share.auto.offset.reset"] == ("earliest", 8)  # GROUP_CONFIG
    assert seen["share.session.timeout.ms"] == ("45000", 5)  # DEFAULT_CONFIG
    # refused before sending (Kafka's rule), and by the broker (its bounds)
    rc, _out, err = fm("config", "alter", *entity, "--add-config", "share.isolation.level=x")
    assert rc != 0
    one_error_line(err, "Invalid value x for configuration share.isolation.level")
    rc, _out, err = fm("config", "alter", *entity, "--add-config",
                       "consumer.session.timeout.ms=1000")
    assert rc == 1
    one_error_line(err, "group app", "INVALID_CONFIG",
                   "consumer.session.timeout.ms must be greater than or equal to "
                   "group.consumer.min.session.timeout.ms")
    rc, out, err = fm("config", "alter", *entity, "--delete-config",
                      "share.auto.offset.reset,consumer.session.timeout.ms")
    assert rc == 0, err
    rc, out, err = fm("config", "describe", *entity)
    assert out.splitlines() == ["Dynamic configs for group app are:"], err


def test_config_users_and_clients(fm: Run) -> None:
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    rc, out, err = fm("config", "alter", *alice, "--add-config",
                      "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert rc == 0 and out.strip() == "Completed updating config for user-principal 'alice'.", err
    rc, out, err = fm("config", "alter", *alice, "--entity-type", "clients", "--entity-name",
                      "app", "--add-config", "request_percentage=12.5")
    assert rc == 0, err
    rc, out, err = fm("config", "alter", "--entity-type", "clients", "--entity-default",
                      "--add-config", "producer_byte_rate=500")
    assert rc == 0 and out.strip() == "Completed updating config for the default client-id.", err
    rc, out, _err = fm("config", "describe", *alice)
    assert out.splitlines() == ["Quota configs for user-principal 'alice' are "
                                "consumer_byte_rate=2048.0, producer_byte_rate=1024.0"]
    rc, out, _err = fm("config", "describe", "--entity-type", "users", "--entity-type", "clients")
    assert out.splitlines() == ["Quota configs for user-principal 'alice', client-id 'app' are "
                                "request_percentage=12.5"]
    rc, out, _err = fm("config", "describe", "--entity-type", "clients", "--json")
    assert json.loads(out) == [{"entity": [{"entity_type": "client-id", "entity_name": None}],
                                "quotas": {"producer_byte_rate": 500.0}}]
    # The same quotas through `floodmark quota` (one implementation underneath).
    rc, out, _err = fm("quota", "list", "--user", "alice", "--strict")
    assert out.strip() == "user=alice: consumer_byte_rate=2048, producer_byte_rate=1024"
    assert fm("config", "alter", *alice, "--delete-config", "consumer_byte_rate")[0] == 0
    rc, out, _err = fm("config", "describe", *alice)
    assert "consumer_byte_rate" not in out and "producer_byte_rate=1024.0" in out

    rc, _out, err = fm("config", "alter", *alice, "--add-config", "producer_byte_rate=-1")
    assert rc == 1
    one_error_line(err, "must be greater than 0")
    rc, _out, err = fm("config", "alter", *alice, "--add-config", "bogus_rate=1")
    assert rc == 1
    one_error_line(err, "bogus_rate")
    rc, _out, err = fm("config", "alter", *alice, "--add-config", "SCRAM-SHA-256=[password=x]")
    assert rc == 1 and "password=x" not in err
    one_error_line(err, "floodmark user scram")


def test_topic_describe_all_configs(fm: Run) -> None:
    assert fm("topic", "create", "desc", "--config", "segment.bytes=1048576")[0] == 0
    rc, plain, err = fm("topic", "describe", "desc")
    assert rc == 0, err
    assert plain.splitlines()[0].endswith("Configs: segment.bytes=1048576")  # unchanged
    assert "source" not in plain
    rc, out, err = fm("topic", "describe", "desc", "--all-configs")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == plain.splitlines()[0]
    assert "  config segment.bytes=1048576 source DYNAMIC_TOPIC_CONFIG" in lines
    assert "  config cleanup.policy=delete source DEFAULT_CONFIG" in lines
    doc = json.loads(fm("topic", "describe", "desc", "--json", "--all-configs")[1])
    assert doc["configs"] == {"segment.bytes": "1048576"}  # the overrides, as before
    sources = {c["name"]: c["source"] for c in doc["all_configs"]}
    assert sources["segment.bytes"] == "DYNAMIC_TOPIC_CONFIG"
    assert sources["retention.ms"] == "DEFAULT_CONFIG"
    assert "all_configs" not in json.loads(fm("topic", "describe", "desc", "--json")[1])


def first_offset(bootstrap: str, topic: str, partition: int) -> int:
    """The offset of the first record a real consumer reads from the beginning."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"first-{topic}-{partition}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, -2)])  # OFFSET_BEGINNING
        for _ in range(100):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                return int(msg.offset())
        raise AssertionError(f"no record read from {topic}-{partition}")
    finally:
        c.close()


def test_delete_records(broker, fm: Run, tmp_path: Path) -> None:
    assert fm("topic", "create", "dr", "--partitions", "2")[0] == 0
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        for partition in (0, 1):
            p.produce("dr", value=f"v{i}".encode(), partition=partition)
    assert p.flush(20) == 0
    rc, out, err = fm("topic", "delete-records", "dr", "--partition", "0", "--offset", "4")
    assert rc == 0, err
    assert out.splitlines() == ["Records delete operation completed:",
                                "partition: dr-0\tlow_watermark: 4"]
    assert first_offset(broker.bootstrap, "dr", 0) == 4
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        assert c.get_watermark_offsets(TopicPartition("dr", 0), timeout=20) == (4, 10)
    finally:
        c.close()

    # kafka-delete-records.sh's file: -1 is the high watermark; a refusal per partition.
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "dr", "partition": 1, "offset": -1},
        {"topic": "dr", "partition": 0, "offset": 11},
        {"topic": "nope", "partition": 0, "offset": 1}]}))
    rc, out, err = fm("topic", "delete-records", "--offset-json-file", str(spec), "--json")
    assert rc == 1, err
    assert json.loads(out) == [
        {"topic": "dr", "partition": 0,
         "error": "OFFSET_OUT_OF_RANGE (1) [the offset is above the high watermark]"},
        {"topic": "dr", "partition": 1, "low_watermark": 10},
        {"topic": "nope", "partition": 0,
         "error": "UNKNOWN_TOPIC_OR_PARTITION (3) [no such topic or partition "
                  "(`floodmark topic list`)]"}]
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "dr"}]}')
    for argv, needle in ((["dr", "--partition", "0"], "needs TOPIC --partition P --offset O"),
                         (["dr", "--partition", "0", "--offset", "-2"], "-1 (the high"),
                         (["--offset-json-file", str(bad)], "partitions[0] is not"),
                         (["--offset-json-file", str(tmp_path / "none.json")], "No such file")):
        rc, _out, err = fm("topic", "delete-records", *argv)
        assert rc == 1
        one_error_line(err, needle)


def test_elect_leaders_one_broker(fm: Run, tmp_path: Path) -> None:
    assert fm("topic", "create", "el", "--partitions", "2")[0] == 0
    rc, out, err = fm("cluster", "elect-leaders", "--election-type", "preferred",
                      "--topic", "el", "--partition", "1")
    assert rc == 0 and out.splitlines() == ["Valid replica already elected for partitions el-1"]
    spec = tmp_path / "el.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "el", "partition": 0},
                                               {"topic": "el", "partition": 7}]}))
    rc, out, err = fm("cluster", "elect-leaders", "--election-type", "unclean",
                      "--path-to-json-file", str(spec), "--json")
    assert rc == 1
    assert [(r["topic"], r["partition"], r["outcome"]) for r in json.loads(out)] == [
        ("el", 0, "ELECTION_NOT_NEEDED"), ("el", 7, "UNKNOWN_TOPIC_OR_PARTITION")]
    one_error_line(err, "1 replica(s) could not be elected")
    rc, out, err = fm("cluster", "elect-leaders", "--election-type", "preferred",
                      "--topic", "el", "--partition", "7")
    assert rc == 1
    assert out.splitlines() == ["Error completing leader election (PREFERRED) for partition: "
                                "el-7: UNKNOWN_TOPIC_OR_PARTITION (3): unknown partition el-7 "
                                "[no such topic or partition (`floodmark topic list`)]"]
    rc, out, err = fm("cluster", "elect-leaders", "--election-type", "preferred",
                      "--all-topic-partitions")
    assert rc == 0 and "el-0, el-1" in out, err
    for argv, needle in ((["--topic", "el"], "--topic needs --partition"),
                         (["--topic", "el", "--partition", "0", "--all-topic-partitions"],
                          "give one of")):
        rc, _out, err = fm("cluster", "elect-leaders", "--election-type", "preferred", *argv)
        assert rc == 1
        one_error_line(err, needle)


def test_log_dirs(broker, fm: Run) -> None:
    assert fm("topic", "create", "ld", "--partitions", "2")[0] == 0
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(20):
        p.produce("ld", value=b"x" * 100, partition=0)
    assert p.flush(20) == 0
    rc, out, err = fm("cluster", "log-dirs", "--topic", "ld", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["version"] == 1
    (b,) = doc["brokers"]
    (d,) = b["logDirs"]
    assert b["broker"] == 1 and d["error"] is None
    assert Path(d["logDir"]) == Path(broker.data_dir).resolve()
    assert d["totalBytes"] >= d["usableBytes"] > 0
    sizes = {p["partition"]: (p["size"], p["offsetLag"]) for p in d["partitions"]}
    assert set(sizes) == {"ld-0", "ld-1"}
    assert sizes["ld-0"][0] > 2000 and sizes["ld-1"] == (0, 0) and sizes["ld-0"][1] == 0
    rc, out, err = fm("cluster", "log-dirs", "--broker", "1", "--topic", "ld")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"broker 1  log dir {d['logDir']}  total ")
    assert lines[1].split() == ["PARTITION", "SIZE_BYTES", "OFFSET_LAG"]
    assert lines[2].split() == ["ld-0", str(sizes["ld-0"][0]), "0"]
    rc, _out, err = fm("cluster", "log-dirs", "--broker", "5")
    assert rc == 1
    one_error_line(err, "--broker 5: not a live broker (live: 1)")
