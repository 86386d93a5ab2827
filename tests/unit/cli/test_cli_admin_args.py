"""The argument rules of ``config``, ``topic delete-records`` and ``cluster elect-leaders``
(pure: the parser and the checks, no broker)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from floodmark.cli import config, delete_records, elect_leaders
from floodmark.cli.common import CliError, kafka_config_list
from floodmark.cli.main import build_parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_kafka_config_list() -> None:
    assert kafka_config_list(["a=1,cleanup.policy=[compact,delete]", " b=2 "]) == [
        "a=1", "cleanup.policy=compact,delete", "b=2"]


def test_config_entities_in_order() -> None:
    args = parse("config", "alter", "--entity-type", "users", "--entity-name", "alice",
                 "--entity-type", "clients", "--entity-default", "--add-config", "x=1")
    assert config._entities(args) == [("users", "alice"), ("clients", None)]
    args = parse("config", "describe", "--entity-type", "brokers")
    assert config._entities(args) == [("brokers", "...")]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--entity-type", "topics", "--entity-type", "brokers"], "users and clients"),
    (["--entity-type", "topics", "--entity-name", "a", "--entity-name", "b"], "more --entity"),
    (["--entity-type", "topics", "--entity-default"], "not supported for topics"),
    (["--entity-type", "brokers", "--entity-name", "one"], "a number"),
])
def test_config_entity_mistakes(argv: list[str], needle: str) -> None:
    with pytest.raises(CliError, match=needle):
        config._entities(parse("config", "describe", *argv))


def test_config_entry_kafka_line() -> None:
    entry = config.ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", False, False, (
        ("DYNAMIC_TOPIC_CONFIG", "retention.ms", "1000"),
        ("DEFAULT_CONFIG", "log.retention.ms", "604800000")))
    assert entry.kafka_line() == ("retention.ms=1000 sensitive=false synonyms={"
                                  "DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
                                  "DEFAULT_CONFIG:log.retention.ms=604800000}")
    assert config.source_name(99) == "source 99"


def test_delete_records_file(tmp_path: Path) -> None:
    f = tmp_path / "o.json"
    f.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "offset": 5}, {"topic": "a", "partition": 1,
                                                       "offset": -1}]}))
    assert delete_records._from_file(f) == {("a", 0): 5, ("a", 1): -1}
    for doc, needle in (({"partitions": []}, "expected"),
                        ({"partitions": [{"topic": "a", "partition": "0", "offset": 1}]},
                         r"partitions\[0\]"),
                        ({"partitions": [{"topic": "a", "partition": 0, "offset": 1}] * 2},
                         "twice"),
                        ({"partitions": [{"topic": "a", "partition": 0, "offset": -3}]},
                         "-1")):
        f.write_text(json.dumps(doc))
        with pytest.raises(CliError, match=needle):
            delete_records._from_file(f)
    f.write_text("{")
    with pytest.raises(CliError, match="not JSON"):
        delete_records._from_file(f)


def test_elect_leaders_partitions(tmp_path: Path) -> None:
    def partitions(*argv: str) -> list[tuple[str, int]] | None:
        return elect_leaders._partitions(parse(
            "cluster", "elect-leaders", "--election-type", "PREFERRED", *argv))
    assert partitions("--all-topic-partitions") is None
    assert partitions("--topic", "t", "--partition", "2") == [("t", 2)]
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0}]}))
    assert partitions("--path-to-json-file", str(f)) == [("t", 0)]
    for argv, needle in ((["--topic", "t"], "needs --partition"),
                         ([], "give one of"),
                         (["--all-topic-partitions", "--partition", "1"], "goes with --topic")):
        with pytest.raises(CliError, match=needle):
            partitions(*argv)


def test_replica_assignment_and_reassignment_files(tmp_path: Path) -> None:
    from floodmark.cli.reassign import read_reassignment, reassignment_json
    from floodmark.cli.topic import replica_assignment
    assert replica_assignment("1:2,2:3, 3:1") == [[1, 2], [2, 3], [3, 1]]
    assert replica_assignment(None) == []
    for bad in ("1:x", "1:1", "1:2,3", "-1:2"):
        with pytest.raises(CliError):
            replica_assignment(bad)
    f = tmp_path / "r.json"
    f.write_text(reassignment_json({("t", 1): [3, 1], ("t", 0): [1, 2]}))
    doc = json.loads(f.read_text())
    assert doc["version"] == 1 and [p["partition"] for p in doc["partitions"]] == [0, 1]
    assert read_reassignment(f) == {("t", 0): [1, 2], ("t", 1): [3, 1]}
    f.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
                 '"replicas": [1]}, {"topic": "t", "partition": 0, "replicas": [2]}]}')
    with pytest.raises(CliError, match="t-0 appears twice"):
        read_reassignment(f)
    with pytest.raises(SystemExit):  # one action, argparse's own one-line error
        parse("cluster", "reassign-partitions", "--list", "--verify")
