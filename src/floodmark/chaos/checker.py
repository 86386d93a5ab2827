"""The history checker: Jepsen's Kafka anomalies, plus floodmark's own end-of-run checks.

Pure: a list of history events (``floodmark.chaos.history``) and, optionally, every replica's
records at the end, in; a verdict out. Keys are ``topic-partition``; values are unique per send
(the workload never re-sends a value by itself, only clients' internal retries can).

The version order of a key is every ``(offset, value)`` seen by any poll and every offset an
acknowledged send was given. Anomalies (each a list of examples with the history ``lines`` that
prove it):

* ``inconsistent_offsets`` — two values at one offset (``values-at-offset``), or one value given
  two offsets by an acknowledgement and a read (``value-at-offsets``);
* ``duplicated`` — one value read at two offsets (the log held it twice);
* ``lost`` — acknowledged and missing from the final read of a key that was read completely;
* ``unseen`` — acknowledged and never read by anyone, where the final read was incomplete;
* ``aborted_read`` — a poll returned a value whose send definitely failed;
* ``nonmonotonic`` — per producer and key, a later send acknowledged at a lower offset
  (``nonmonotonic-send``); per consumer and key, offsets going backwards inside one poll
  (``int-nonmonotonic-poll``) or, for consumers by assignment, from one poll to the next
  (``nonmonotonic-poll``; an assign, rebalance or crash starts afresh);
* ``poll_skip`` — the same, skipping an offset the version order has (``int-poll-skip``,
  ``poll-skip``);
* ``read_beyond_hw`` — a consumer was given a record that was never acknowledged and is not in
  the final read of a key read completely: committed records never leave the log, so it was
  read at or above the HW (SPEC §4) and truncated later. (The high watermarks clients report
  with their polls are kept in the history for people, not used here: a client's cached HW may
  come from a newer fetch, e.g. a new leader's, than the one that delivered a record.)
* ``replicas_diverged`` — at the end, a replica holds a record below the high watermark that is
  not the final read's record at that offset, or lacks one while it is in the ISR.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ANOMALIES = ("lost", "duplicated", "inconsistent_offsets", "nonmonotonic", "aborted_read",
             "poll_skip", "unseen", "read_beyond_hw", "replicas_diverged")
MAX_EXAMPLES = 200
FINAL_PROCESS = "final"
_MISSING: Any = object()

Event = Mapping[str, Any]
# key -> broker id -> offset -> value: every replica's records at the end of the run
Replicas = Mapping[str, Mapping[int, Mapping[int, "str | None"]]]


def key_of(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


@dataclass
class CheckResult:
    valid: bool
    acknowledged: int
    attempted: int
    read: int
    anomalies: dict[str, list[dict[str, Any]]]
    counts: dict[str, int]
    final: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "acknowledged": self.acknowledged,
                "attempted": self.attempted, "read": self.read,
                "anomalies": self.anomalies, "anomaly_counts": self.counts,
                "final": self.final}


class _Found:
    def __init__(self) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = {name: [] for name in ANOMALIES}
        self.counts: dict[str, int] = dict.fromkeys(ANOMALIES, 0)

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] += 1
        if len(self.lists[name]) < MAX_EXAMPLES:
            self.lists[name].append(example)


def _line(event: Event, index: int) -> int:
    return int(event.get("line", index + 1))


def check(events: Sequence[Event], replicas: Replicas | None = None,
          in_sync: Mapping[str, Sequence[int]] | None = None) -> CheckResult:
    """``in_sync``: key -> the ISR at the end (replicas there must hold every record below the
    HW); replicas not listed are only checked for the records they do hold."""
    found = _Found()
    invoke_line: dict[str, int] = {}
    send_key: dict[str, str] = {}
    # value -> key, offset (None: acknowledged without one, as librdkafka does for a batch whose
    # response was lost once a later batch of the same producer succeeded), line
    acked: dict[str, tuple[str, int | None, int]] = {}
    failed: dict[str, int] = {}                     # value -> line
    # version order: key -> offset -> value -> lines
    at: dict[str, dict[int, dict[str, list[int]]]] = defaultdict(lambda: defaultdict(dict))
    read_at: dict[str, dict[str, dict[int, list[int]]]] = defaultdict(lambda: defaultdict(dict))
    final_log: dict[str, dict[int, str]] = defaultdict(dict)
    final_hw: dict[str, int] = {}
    final_low: dict[str, int] = {}
    final_complete = False
    polls: list[tuple[int, Event]] = []
    sends_by_process: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)

    for index, event in enumerate(events):
        line = _line(event, index)
        f, type_ = event.get("f"), event.get("type")
        if f == "send":
            value = str(event["value"])
            key = key_of(event["topic"], int(event["partition"]))
            if type_ == "invoke":
                invoke_line[value] = line
                send_key[value] = key
                sends_by_process[(str(event["process"]), key)].append((line, value))
            elif type_ == "ok":
                raw = event.get("offset")
                offset = None if raw is None or int(raw) < 0 else int(raw)
                acked[value] = (key, offset, line)
                if offset is not None:
                    at[key][offset].setdefault(value, []).append(line)
            elif type_ == "fail":
                failed[value] = line
        elif f == "poll":
            polls.append((line, event))
            for topic, partition, offset, value in event.get("records", []):
                key, value = key_of(topic, int(partition)), str(value)
                at[key][int(offset)].setdefault(value, []).append(line)
                read_at[key][value].setdefault(int(offset), []).append(line)
                if event.get("process") == FINAL_PROCESS:
                    final_log[key][int(offset)] = value
        elif f == "final":
            final_complete = bool(event.get("complete"))
            for topic, partition, hw, *low in event.get("high_watermarks", []):
                final_hw[key_of(topic, int(partition))] = int(hw)
                final_low[key_of(topic, int(partition))] = int(low[0]) if low else 0

    known = {key: sorted(offsets) for key, offsets in at.items()}

    # -- inconsistent offsets, duplicates -------------------------------------------------------
    for key in sorted(at):
        for offset in sorted(at[key]):
            values = at[key][offset]
            if len(values) > 1:
                found.add("inconsistent_offsets", {
                    "kind": "values-at-offset", "key": key, "offset": offset,
                    "values": sorted(values),
                    "lines": sorted({n for lines in values.values() for n in lines})})
    for key in sorted(read_at):
        for value, offsets in sorted(read_at[key].items()):
            if len(offsets) > 1:
                found.add("duplicated", {"key": key, "value": value, "offsets": sorted(offsets),
                                         "lines": sorted({n for v in offsets.values() for n in v})})
    for value, (key, offset, line) in sorted(acked.items(), key=lambda kv: kv[1][2]):
        read_offsets = read_at.get(key, {}).get(value, {})
        if read_offsets and offset is not None and offset not in read_offsets:
            found.add("inconsistent_offsets", {
                "kind": "value-at-offsets", "key": key, "value": value,
                "offsets": sorted({offset, *read_offsets}),
                "lines": sorted({line, *(n for v in read_offsets.values() for n in v)})})

    # -- lost, unseen ---------------------------------------------------------------------------
    def complete(key: str) -> bool:
        hw = final_hw.get(key)
        return final_complete and hw is not None and all(
            o in final_log[key] for o in range(final_low.get(key, 0), hw))

    final_values = {key: set(log.values()) for key, log in final_log.items()}
    for value, (key, offset, line) in sorted(acked.items(), key=lambda kv: kv[1][2]):
        if value in final_values.get(key, ()):
            continue
        lines = [invoke_line.get(value, line), line]
        if complete(key):
            found.add("lost", {"key": key, "value": value, "offset": offset,
                               "acknowledged": True, "lines": lines})
        elif not read_at.get(key, {}).get(value):
            found.add("unseen", {"key": key, "value": value, "offset": offset, "lines": lines})
    for key in sorted(read_at):
        if not complete(key):
            continue
        for value, offsets in sorted(read_at[key].items()):
            if value in acked or value in final_values.get(key, ()):
                continue
            # Never acknowledged, read, and not in the committed log at the end: a committed
            # record never leaves the log, so it was read before it was committed (at or above
            # the HW), then truncated.
            found.add("read_beyond_hw", {
                "key": key, "value": value, "offsets": sorted(offsets),
                "lines": sorted({n for v in offsets.values() for n in v})})

    # -- aborted reads --------------------------------------------------------------------------
    for key in sorted(read_at):
        for value, offsets in sorted(read_at[key].items()):
            if value in failed:
                found.add("aborted_read", {
                    "key": key, "value": value,
                    "lines": sorted({failed[value], *(n for v in offsets.values() for n in v)})})

    # -- nonmonotonic sends ---------------------------------------------------------------------
    for (process, key), sends in sorted(sends_by_process.items()):
        last: tuple[int, str, int] | None = None
        for _line_no, value in sends:
            if value not in acked or acked[value][1] is None:
                continue
            offset, ok_line = acked[value][1], acked[value][2]
            assert offset is not None
            if last is not None and offset <= last[2]:
                found.add("nonmonotonic", {
                    "kind": "nonmonotonic-send", "process": process, "key": key,
                    "values": [last[1], value], "offsets": [last[2], offset],
                    "lines": [last[0], ok_line]})
            last = (ok_line, value, offset)

    # -- polls: order, skips, reads above the HW ------------------------------------------------
    mode: dict[str, str] = {}
    previous: dict[tuple[str, str], tuple[int, int]] = {}   # (process, key) -> offset, line
    order_sorted = sorted(((line, e) for line, e in polls), key=lambda t: t[0])
    resets = sorted(((_line(e, i), e) for i, e in enumerate(events)
                     if e.get("f") in ("assign", "subscribe", "rebalance", "crash")),
                    key=lambda t: t[0])
    merged = sorted([(line, 1, e) for line, e in order_sorted]
                    + [(line, 0, e) for line, e in resets], key=lambda t: (t[0], t[1]))
    for line, is_poll, event in merged:
        process = str(event.get("process"))
        if not is_poll:
            if event["f"] in ("assign", "subscribe"):
                mode[process] = str(event["f"])
            for k in [k for k in previous if k[0] == process]:
                del previous[k]
            continue
        inside: dict[str, int] = {}
        for topic, partition, offset, _value in event.get("records", []):
            key, offset = key_of(topic, int(partition)), int(offset)
            pk = (process, key)
            if key in inside:
                prev, internal = inside[key], True
            elif pk in previous and mode.get(process) == "assign":
                prev, internal = previous[pk][0], False
            else:
                prev = None
                internal = False
            if prev is not None:
                lines = [line] if internal else [previous[pk][1], line]
                if offset <= prev:
                    found.add("nonmonotonic", {
                        "kind": "int-nonmonotonic-poll" if internal else "nonmonotonic-poll",
                        "process": process, "key": key, "offsets": [prev, offset],
                        "lines": lines})
                else:
                    positions = known.get(key, [])
                    i = bisect.bisect_right(positions, prev)
                    if i < len(positions) and positions[i] < offset:
                        found.add("poll_skip", {
                            "kind": "int-poll-skip" if internal else "poll-skip",
                            "process": process, "key": key, "offsets": [prev, offset],
                            "skipped": positions[i], "lines": lines})
            inside[key] = offset
            previous[pk] = (offset, line)

    # -- replicas at the end --------------------------------------------------------------------
    for key, brokers in sorted((replicas or {}).items()):
        hw = final_hw.get(key)
        if hw is None or not complete(key):
            continue
        log = final_log[key]
        isr = set((in_sync or {}).get(key, ()))
        for broker, records in sorted(brokers.items()):
            for offset in range(final_low.get(key, 0), hw):
                mine = records.get(offset, _MISSING)
                if mine is _MISSING and broker not in isr:
                    continue
                if mine != log.get(offset):
                    found.add("replicas_diverged", {
                        "key": key, "broker": broker, "offset": offset,
                        "replica_value": None if mine is _MISSING else mine,
                        "log_value": log.get(offset), "high_watermark": hw, "lines": []})
                    break

    valid = not any(found.counts.values())
    return CheckResult(
        valid=valid, acknowledged=len(acked), attempted=len(invoke_line),
        read=sum(len(v) for v in read_at.values()), anomalies=found.lists, counts=found.counts,
        final={"complete": final_complete, "high_watermarks": dict(sorted(final_hw.items()))})

