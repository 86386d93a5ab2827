"""Issue 24 §2, errors that say why, against a real broker process: a config value Kafka refuses
is refused with Kafka's words by the broker (to a real client: confluent-kafka's AdminClient)
and by the CLI before it sends; the broker's error message is printed beside the code (a
keyless record to a compacted topic, through the real console script); ``produce`` says it had
a missing topic created, or refuses it with ``--no-create``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.integration.conftest import Run

pytestmark = pytest.mark.integration

RETENTION_REFUSED = ("Invalid value -5 for configuration retention.ms: Value must be at least "
                     "-1")


@pytest.fixture
def fm(fm_in_process: Run) -> Run:
    return fm_in_process


def one_error_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


def topics_of(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=20).topics)


def test_the_broker_refuses_a_value_kafka_refuses_with_kafkas_words(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.create_topics(
        [NewTopic("neg-retention", 1, 1, config={"retention.ms": "-5"})]).values()
    with pytest.raises(KafkaException) as err:
        future.result(20)
    kafka_error = err.value.args[0]
    assert kafka_error.name() == "INVALID_CONFIG"
    assert RETENTION_REFUSED in kafka_error.str()
    assert "neg-retention" not in topics_of(broker.bootstrap)  # nothing half-made

    (future,) = admin.create_topics([NewTopic("bounded", 1, 1)]).values()
    future.result(20)
    for name, value, message in [
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: "
         "Value must be at least 1"),
        ("cleanup.policy", "compact,keep", "Invalid value keep for configuration "
         "cleanup.policy: String must be one of: compact, delete"),
    ]:
        resource = ConfigResource(ResourceType.TOPIC, "bounded", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
        (future,) = admin.incremental_alter_configs([resource]).values()
        with pytest.raises(KafkaException) as err:
            future.result(20)
        assert err.value.args[0].name() == "INVALID_CONFIG"
        assert message in err.value.args[0].str()
    # the broker keeps serving: a good value goes through
    resource = ConfigResource(ResourceType.TOPIC, "bounded", incremental_configs=[
        ConfigEntry("retention.ms", "-1", incremental_operation=AlterConfigOpType.SET)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(20)


def test_the_cli_refuses_before_sending_and_prints_the_brokers_words(broker, fm: Run) -> None:
    rc, _out, err = fm("topic", "create", "cli-neg", "--config", "retention.ms=-5")
    assert rc == 1
    assert one_error_line(err) == f"error: {RETENTION_REFUSED}"
    rc, _out, err = fm("config", "alter", "--entity-type", "brokers", "--entity-default",
                       "--add-config", "log.cleanup.policy=keep")
    assert rc == 1
    one_error_line(err, "Invalid value keep for configuration log.cleanup.policy: String must "
                        "be one of: compact, delete")
    assert "cli-neg" not in topics_of(broker.bootstrap)
    # a name the CLI does not know goes to the broker, whose words are printed beside the code
    rc, _out, err = fm("topic", "create", "cli-unknown", "--config", "retention.fortnights=1")
    assert rc == 1
    one_error_line(err, "INVALID_CONFIG (40): Unknown topic config name: retention.fortnights")


def test_a_keyless_record_to_a_compacted_topic_prints_why(broker, fm: Run,
                                                          tmp_path: Path) -> None:
    assert fm("topic", "create", "compacted", "--config", "cleanup.policy=compact")[0] == 0
    lines = tmp_path / "lines.txt"
    lines.write_text("no key here\n")
    out = subprocess.run(  # the console script's code in its own process
        [sys.executable, "-m", "floodmark.cli", "produce", "compacted", "--file", str(lines),
         "--bootstrap-server", broker.bootstrap], capture_output=True, text=True, timeout=60,
        check=False, stdin=subprocess.DEVNULL)
    assert out.returncode == 1, out.stderr
    one_error_line(out.stderr, "INVALID_RECORD (87): Compacted topic cannot accept message "
                               "without key")
    assert "Traceback" not in out.stderr


def test_produce_says_it_had_a_missing_topic_created(broker, fm: Run, tmp_path: Path) -> None:
    lines = tmp_path / "lines.txt"
    lines.write_text("a\nb\n")
    rc, _out, err = fm("produce", "never-made", "--file", str(lines), "--no-create")
    assert rc == 1
    one_error_line(err, "topic never-made does not exist (--no-create)",
                   "floodmark topic create never-made")
    assert "never-made" not in topics_of(broker.bootstrap)

    rc, _out, err = fm("produce", "made-now", "--file", str(lines))
    assert rc == 0, err
    assert err.splitlines() == [
        "topic made-now did not exist: the cluster auto-created it with 1 partition(s) "
        "(num.partitions; --no-create refuses instead)",
        "produced 2 record(s) to made-now"]
    rc, _out, err = fm("produce", "made-now", "--file", str(lines))  # exists now: no note
    assert rc == 0 and err.splitlines() == ["produced 2 record(s) to made-now"], err


def test_produce_to_a_cluster_that_does_not_create_topics(broker_factory,
                                                          tmp_path: Path) -> None:
    strict = broker_factory("--set", "auto.create.topics.enable=false")
    lines = tmp_path / "lines.txt"
    lines.write_text("a\n")
    out = subprocess.run(
        [sys.executable, "-m", "floodmark.cli", "produce", "absent", "--file", str(lines),
         "--bootstrap-server", strict.bootstrap], capture_output=True, text=True, timeout=60,
        check=False, stdin=subprocess.DEVNULL)
    assert out.returncode == 1
    one_error_line(out.stderr, "auto.create.topics.enable=false")
