"""Who wrote a value twice, from the copies' batch headers in a partition directory.

The first case is the shape the chaos run found (seed 7, kill + pause, a loaded machine):
librdkafka's request for 276 records under epoch 10 was written, timed out on the client (its
first records had reached ``message.timeout.ms``), and after the epoch bump the other 269 were
sent again under epoch 11 from sequence 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from floodmark.chaos.checker import CheckResult
from floodmark.chaos.duplicates import (
    Copy,
    client_resent_only,
    explain,
    explain_replicas,
    origin,
    record_copies,
)
from floodmark.records import Record, build_batch

PID = 1000


def segment(tmp_path: Path, *batches: bytes) -> Path:
    part = tmp_path / "chaos-b-1"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"".join(batches))
    return part


def batch(base_offset: int, values: list[str], *, producer_id: int = PID, epoch: int = 0,
          sequence: int = 0, leader_epoch: int = 5) -> bytes:
    records = [Record(base_offset + i, 1_000 + i, None, v.encode()) for i, v in enumerate(values)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=leader_epoch,
                       producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def test_a_batch_renumbered_after_an_epoch_bump_is_the_clients_resend(tmp_path: Path) -> None:
    part = segment(tmp_path,
                   batch(0, ["cp1-1", "cp1-2", "cp1-3"], epoch=10, sequence=0),
                   batch(3, ["cp1-2", "cp1-3"], epoch=11, sequence=0))
    logs = {"chaos-b-1": record_copies(part)}
    examples: list[dict[str, Any]] = [
        {"key": "chaos-b-1", "value": "cp1-2", "offsets": [1, 3]}]
    counts = explain(examples, logs)
    assert counts["resent_new_epoch"] == 2 and sum(counts.values()) == 2
    assert examples[0]["origin"] == "resent_new_epoch"
    assert examples[0]["copies"] == [
        {"offset": 1, "producer_id": PID, "producer_epoch": 10, "sequence": 1,
         "partition_leader_epoch": 5},
        {"offset": 3, "producer_id": PID, "producer_epoch": 11, "sequence": 0,
         "partition_leader_epoch": 5}]


def test_the_same_sequence_at_two_offsets_is_the_brokers(tmp_path: Path) -> None:
    part = segment(tmp_path, batch(0, ["a"], epoch=2, sequence=7),
                   batch(1, ["a"], epoch=2, sequence=7))
    assert explain([], {"k": record_copies(part)})["same_sequence_twice"] == 1


def test_origins_of_other_shapes() -> None:
    def c(pid: int, epoch: int, seq: int) -> Copy:
        return Copy(0, pid, epoch, seq, 0)

    assert origin([c(1, 0, 0), c(2, 0, 0)]) == "resent_new_producer"
    assert origin([c(1, 0, 0), c(1, 0, 5)]) == "two_sequences_one_epoch"
    assert origin([c(-1, -1, -1), c(-1, -1, -1)]) == "not_idempotent"
    assert origin([c(1, 0, 0), None]) == "unknown"


def test_an_example_whose_offset_holds_another_value_is_unknown(tmp_path: Path) -> None:
    part = segment(tmp_path, batch(0, ["a", "b"]))
    examples: list[dict[str, Any]] = [{"key": "k", "value": "a", "offsets": [0, 1]}]
    explain(examples, {"k": record_copies(part)})
    assert examples[0]["origin"] == "unknown"


def test_the_run_reads_the_fullest_replica(tmp_path: Path) -> None:
    # broker 2 lost the second copy (it is behind); broker 1 holds both
    for broker, batches in ((1, [batch(0, ["a"], epoch=0), batch(1, ["a"], epoch=1)]),
                            (2, [batch(0, ["a"], epoch=0)])):
        part = tmp_path / f"broker-{broker}" / "chaos-b-1"
        part.mkdir(parents=True)
        (part / "00000000000000000000.log").write_bytes(b"".join(batches))
    replicas = {"chaos-b-1": {1: {0: "a", 1: "a"}, 2: {0: "a"}}}
    examples: list[dict[str, Any]] = [{"key": "chaos-b-1", "value": "a", "offsets": [0, 1]}]
    counts = explain_replicas(examples, replicas,
                              lambda b, topic, p: tmp_path / f"broker-{b}" / f"{topic}-{p}")
    assert counts["resent_new_epoch"] == 1
    assert examples[0]["origin"] == "resent_new_epoch"


def _verdict(origins: dict[str, int], example_origins: list[str],
             other: dict[str, int] | None = None) -> CheckResult:
    counts = {"duplicated": sum(origins.values()), "lost": 0, **(other or {})}
    return CheckResult(valid=False, acknowledged=10, attempted=10, read=10,
                       anomalies={"duplicated": [{"origin": o} for o in example_origins]},
                       counts=counts, duplicates_by_origin=dict(origins))


def test_only_client_resends_keep_the_run_valid_and_say_so() -> None:
    v = _verdict({"resent_new_epoch": 3}, ["resent_new_epoch"] * 3)
    client_resent_only(v)
    assert v.valid and v.duplicates_client_resent
    assert v.as_json()["duplicates_client_resent"] is True
    # a retry appended twice in one epoch is the broker's: invalid
    v = _verdict({"resent_new_epoch": 2, "same_sequence_twice": 1},
                 ["resent_new_epoch", "same_sequence_twice"])
    client_resent_only(v)
    assert not v.valid and not v.duplicates_client_resent
    # another anomaly keeps it invalid
    v = _verdict({"resent_new_epoch": 1}, ["resent_new_epoch"], {"lost": 1})
    client_resent_only(v)
    assert not v.valid and v.duplicates_client_resent
