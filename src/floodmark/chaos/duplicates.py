"""Who wrote a value twice: the batch headers of each copy, read from a replica's files.

The history tells what a producer was told (``checker.DUPLICATE_CLASSES``); the log tells how each
copy was written. An idempotent producer stamps every record with (producer id, producer epoch,
sequence), and the broker appends a (producer id, epoch, sequence) once. So two copies of one value
are:

* ``resent_new_epoch`` — the same producer id under two epochs: the client renumbered a record it
  had already sent, after bumping its epoch. librdkafka does this when a message times out
  (``message.timeout.ms``) while records of a request it could not confirm are still queued: it
  drains, bumps the epoch and gives every queued record a new sequence from 0, so a record whose
  earlier attempt was written is written again, and the broker cannot tell (a new epoch starting
  at sequence 0 is valid). The client's at-least-once effect, not the broker's;
* ``resent_new_producer`` — two producer ids: a new client (or a reset producer id) sent it again;
* ``same_sequence_twice`` — one producer id, epoch and sequence at two offsets: the broker appended
  a retry it should have answered as a duplicate, an idempotence bug of the broker;
* ``two_sequences_one_epoch`` — one producer id and epoch, two sequences: the client gave one value
  two sequences without a bump (a client bug, or an application re-send);
* ``not_idempotent`` — a copy without a producer id;
* ``unknown`` — a copy's offset is not in the replica read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from floodmark.chaos.checker import CheckResult

ORIGINS = ("resent_new_epoch", "resent_new_producer", "same_sequence_twice",
           "two_sequences_one_epoch", "not_idempotent", "unknown")


@dataclass(frozen=True, slots=True)
class Copy:
    """One record's stamp in the log."""

    offset: int
    producer_id: int
    producer_epoch: int
    sequence: int
    partition_leader_epoch: int

    def as_json(self) -> dict[str, int]:
        return asdict(self)


def record_copies(partition_dir: str | Path) -> dict[int, tuple[str, Copy]]:
    """offset -> (value id, stamp) for every data record in a partition directory's segments
    (read-only; transaction markers skipped)."""
    from floodmark.chaos.history import value_id
    from floodmark.chaos.nodes import iter_data_records

    out: dict[int, tuple[str, Copy]] = {}
    for h, r in iter_data_records(partition_dir):
        delta = r.offset - h.base_offset
        sequence = h.base_sequence + delta if h.base_sequence >= 0 else -1
        out[r.offset] = (value_id(r.value), Copy(
            r.offset, h.producer_id, h.producer_epoch, sequence, h.partition_leader_epoch))
    return out


def origin(copies: Sequence[Copy | None]) -> str:
    """Which of ``ORIGINS`` explains these copies of one value."""
    if any(c is None for c in copies):
        return "unknown"
    known = [c for c in copies if c is not None]
    if any(c.producer_id < 0 for c in known):
        return "not_idempotent"
    if len({c.producer_id for c in known}) > 1:
        return "resent_new_producer"
    if len({c.producer_epoch for c in known}) > 1:
        return "resent_new_epoch"
    if len({c.sequence for c in known}) < len(known):
        return "same_sequence_twice"
    return "two_sequences_one_epoch"


def explain(duplicated: list[dict[str, Any]],
            logs: Mapping[str, Mapping[int, tuple[str, Copy]]]) -> dict[str, int]:
    """Count every value held twice in ``logs`` (key -> one replica's records) by origin, and
    annotate the checker's ``duplicated`` examples in place with their copies' stamps and
    origin. Returns the counts (every origin, zeros included)."""
    counts = dict.fromkeys(ORIGINS, 0)
    for records in logs.values():
        seen: dict[str, list[Copy]] = {}
        for _offset, (value, stamp) in sorted(records.items()):
            seen.setdefault(value, []).append(stamp)
        for held in seen.values():
            if len(held) > 1:
                counts[origin(held)] += 1
    for example in duplicated:
        records = logs.get(str(example.get("key")), {})
        stamps: list[Copy | None] = []
        for offset in example.get("offsets", []):
            found = records.get(int(offset))
            stamps.append(found[1] if found is not None and found[0] == example.get("value")
                          else None)
        example["origin"] = origin(stamps)
        example["copies"] = [None if s is None else s.as_json() for s in stamps]
    return counts


def explain_replicas(duplicated: list[dict[str, Any]],
                     replicas: Mapping[str, Mapping[int, Mapping[int, Any]]],
                     partition_dir: Callable[[int, str, int], str | Path]) -> dict[str, int]:
    """:func:`explain` over each key's fullest replica (``replicas``: key -> broker -> offset ->
    value, as the run read them; ``partition_dir(broker, topic, partition)``: its directory)."""
    logs: dict[str, dict[int, tuple[str, Copy]]] = {}
    for key, brokers in replicas.items():
        if not brokers:
            continue
        fullest = max(brokers, key=lambda b: len(brokers[b]))
        topic, _, index = key.rpartition("-")
        logs[key] = record_copies(partition_dir(fullest, topic, int(index)))
    return explain(duplicated, logs)


def client_resent_only(verdict: CheckResult) -> None:
    """When every value held twice was written again by its client under a new producer epoch
    (``resent_new_epoch``: librdkafka timed out a batch the broker had appended, bumped its
    epoch and renumbered the batch's other records from sequence 0, KIP-360; Kafka's broker
    cannot tell such a resend from new records either), the duplicates are the client's
    at-least-once and not a broker fault: the run stays valid if nothing else is wrong, and
    says so with ``duplicates_client_resent``. Any other origin (a retry appended twice in one
    epoch, above all) keeps the run invalid."""
    origins = verdict.duplicates_by_origin
    client = origins.get("resent_new_epoch", 0)
    if client == 0 or any(n for o, n in origins.items() if o != "resent_new_epoch"):
        return
    if any(e.get("origin") != "resent_new_epoch" for e in verdict.anomalies["duplicated"]):
        return
    verdict.duplicates_client_resent = True
    verdict.valid = not any(n for name, n in verdict.counts.items() if name != "duplicated")
