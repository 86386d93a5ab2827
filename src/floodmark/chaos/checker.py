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

``check_txn`` judges the transactional workload's history (Jepsen's queue with transactions):
these checks with the read_uncommitted final read as the final log, then ``lost_commit``,
``aborted_read`` (G1a), ``torn_transaction`` and ``stuck_lso`` against the read_committed
reads (its docstring has the details).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ANOMALIES = ("lost", "duplicated", "inconsistent_offsets", "nonmonotonic", "aborted_read",
             "poll_skip", "unseen", "read_beyond_hw", "replicas_diverged")
# The transactional workload's own (``check_txn``), beside the ones above.
TXN_ANOMALIES = ("lost_commit", "torn_transaction", "stuck_lso")
# What the producer of a ``duplicated`` value was told: ``acknowledged`` (its one delivery
# report named one of the offsets), ``unacknowledged`` (no delivery report, or an indefinite
# error such as _MSG_TIMED_OUT: an attempt the client gave up on may still have been written,
# and a client that bumps its producer epoch and re-sends retried records under it writes them
# again, an at-least-once effect of the client), ``failed`` (refused before it was sent: a
# second copy of that is never a client's doing).
DUPLICATE_CLASSES = ("acknowledged", "unacknowledged", "failed")
MAX_EXAMPLES = 200
FINAL_PROCESS = "final"
FINAL_COMMITTED_PROCESS = "final-rc"
# Reads of the whole log before the brokers are restarted for the final read (ordinary reads)
LIVE_PROCESS = "live"
LIVE_COMMITTED_PROCESS = "live-rc"
ISOLATION_READ_COMMITTED = "read_committed"  # the history's isolation field
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
    transactions: dict[str, Any] = field(default_factory=dict)  # check_txn's figures
    group: dict[str, Any] = field(default_factory=dict)  # group_checker.check_group's figures
    duplicates: dict[str, int] = field(default_factory=dict)
    """The ``duplicated`` values by what their producer was told (``DUPLICATE_CLASSES``)."""
    duplicates_by_origin: dict[str, int] = field(default_factory=dict)
    """The values held twice in the log by how their copies were written
    (``floodmark.chaos.duplicates.ORIGINS``; filled by the run, which reads the replicas)."""
    duplicates_client_resent: bool = False
    """Every duplicate was its client's resend under a new producer epoch
    (``floodmark.chaos.duplicates.client_resent_only``): reported, not counted against
    ``valid``."""

    def as_json(self) -> dict[str, Any]:
        out = {"valid": self.valid, "acknowledged": self.acknowledged,
               "attempted": self.attempted, "read": self.read,
               "anomalies": self.anomalies, "anomaly_counts": self.counts,
               "final": self.final}
        if self.transactions:
            out["transactions"] = self.transactions
        if self.group:
            out["group"] = self.group
        if self.duplicates:
            out["duplicated_by_ack"] = self.duplicates
        if self.duplicates_by_origin:
            out["duplicated_by_origin"] = self.duplicates_by_origin
            out["duplicates_client_resent"] = self.duplicates_client_resent
        return out


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
    final_reached: dict[str, int] = {}   # key -> where a sparse final read's end event came
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
        elif f == "final" and event.get("process", FINAL_PROCESS) == FINAL_PROCESS:
            final_complete = bool(event.get("complete"))
            for topic, partition, hw, *low in event.get("high_watermarks", []):
                final_hw[key_of(topic, int(partition))] = int(hw)
                final_low[key_of(topic, int(partition))] = int(low[0]) if low else 0
            for topic, partition, offset in event.get("reached", []):
                final_reached[key_of(topic, int(partition))] = int(offset)

    known = {key: sorted(offsets) for key, offsets in at.items()}
    # read_committed polls (named so by the transactional workload) skip aborted records and
    # markers: their order is what read_committed polls saw
    seen_committed: dict[str, set[int]] = defaultdict(set)
    for _line_no, event in polls:
        if event.get("isolation") == ISOLATION_READ_COMMITTED:
            for topic, partition, offset, _value in event.get("records", []):
                seen_committed[key_of(topic, int(partition))].add(int(offset))
    known_committed = {key: sorted(offsets) for key, offsets in seen_committed.items()}

    # -- inconsistent offsets, duplicates -------------------------------------------------------
    for key in sorted(at):
        for offset in sorted(at[key]):
            values = at[key][offset]
            if len(values) > 1:
                found.add("inconsistent_offsets", {
                    "kind": "values-at-offset", "key": key, "offset": offset,
                    "values": sorted(values),
                    "lines": sorted({n for lines in values.values() for n in lines})})
    duplicates = dict.fromkeys(DUPLICATE_CLASSES, 0)
    for key in sorted(read_at):
        for value, offsets in sorted(read_at[key].items()):
            if len(offsets) > 1:
                ack = acked.get(value)
                kind = _duplicate_class(ack, value in failed)
                duplicates[kind] += 1
                # the copy the one delivery report named (a client that re-sent the value under
                # a bumped epoch is told the re-sent copy's offset, never the first's)
                ack_offset = ack[1] if ack is not None else None
                found.add("duplicated", {"key": key, "value": value, "offsets": sorted(offsets),
                                         "acknowledged": kind == "acknowledged",
                                         "acknowledged_offset": ack_offset, "class": kind,
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
        return final_complete and hw is not None and (
            final_reached.get(key, -1) >= hw
            or all(o in final_log[key] for o in range(final_low.get(key, 0), hw)))

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
                    positions = (known_committed if event.get("isolation") == ISOLATION_READ_COMMITTED
                                 else known).get(key, [])
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
                if mine is _MISSING and (broker not in isr or offset not in log):
                    # (an offset no consumer sees: a transaction marker's)
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
        final={"complete": final_complete, "high_watermarks": dict(sorted(final_hw.items()))},
        duplicates=duplicates)


def _duplicate_class(ack: tuple[str, int | None, int] | None, definitely_failed: bool) -> str:
    """Which of ``DUPLICATE_CLASSES`` a value read at two offsets belongs to."""
    if ack is not None:
        return "acknowledged"
    return "failed" if definitely_failed else "unacknowledged"


# -- the transactional workload -----------------------------------------------------------------
@dataclass
class Transaction:
    """One transaction of a ``producer-txn`` process, as its history lines tell it."""

    txn: str
    process: str
    values: list[str] = field(default_factory=list)   # sent (not refused before sending)
    commit_invoked: bool = False
    committed: bool = False      # commit_transaction came back ok
    aborted: bool = False        # abort_transaction came back ok
    lines: list[int] = field(default_factory=list)    # begin, end calls and their outcomes

    @property
    def outcome(self) -> str:
        """``committed``; ``aborted`` (an abort came back ok, or no commit was ever asked
        for: only EndTxn(commit) commits, and only ``commit_transaction`` sends it); else
        ``unknown``."""
        if self.committed:
            return "committed"
        if self.aborted or not self.commit_invoked:
            return "aborted"
        return "unknown"


def transactions(events: Sequence[Event]) -> dict[str, Transaction]:
    """Every transaction of the history by id, in the order they began."""
    txns: dict[str, Transaction] = {}
    for index, event in enumerate(events):
        txn_id = event.get("txn")
        if txn_id is None:
            continue
        txn = txns.setdefault(str(txn_id), Transaction(str(txn_id), str(event.get("process"))))
        f, type_, line = event.get("f"), event.get("type"), _line(event, index)
        if f == "send":
            value = str(event["value"])
            if type_ == "invoke":
                txn.values.append(value)
            elif type_ == "fail" and value in txn.values:
                txn.values.remove(value)   # refused before anything was sent
            continue
        txn.lines.append(line)
        if f == "commit":
            txn.commit_invoked = True
            txn.committed = txn.committed or type_ == "ok"
        elif f == "abort":
            txn.aborted = txn.aborted or type_ == "ok"
    return txns


def check_txn(events: Sequence[Event], replicas: Replicas | None = None,
              in_sync: Mapping[str, Sequence[int]] | None = None) -> CheckResult:
    """Jepsen's queue with transactions: ``check`` (the final read of process ``final`` is
    read_uncommitted, so ``lost`` is an acknowledged value missing from it), then, against the
    read_committed final read (process ``final-rc``) and every read_committed poll:

    * ``lost_commit`` — a value of a committed transaction missing from read_committed;
    * ``aborted_read`` (G1a, kind ``aborted-txn``) — a value of an aborted transaction read
      with read_committed; kind ``read-then-vanished``: a value of a transaction whose outcome
      is unknown read during the run, and not visible at the end;
    * ``torn_transaction`` — a transaction partly visible to read_committed (``outcome`` says
      which: a committed one loses values, an aborted one shows some, an unknown one did not
      resolve all or nothing);
    * ``stuck_lso`` — read_committed could not reach the high watermark by the end of the
      final read: an open transaction no coordinator will end pins the last stable offset;
    * ``unseen`` (kind ``committed``) — a committed value never read with read_committed, in a
      partition the read_committed final read did not report at all.

    A partition's committed view is judged where the read_committed final read covers it: the
    whole partition when it reached the high watermark, else below where it stopped."""
    base = check(events, replicas, in_sync)
    found = _Found()
    found.lists.update({name: [] for name in TXN_ANOMALIES})
    found.counts.update(dict.fromkeys(TXN_ANOMALIES, 0))
    for name in ANOMALIES:
        found.lists[name] = list(base.anomalies[name])
        found.counts[name] = base.counts[name]
    txns = transactions(events)
    txn_of: dict[str, str] = {v: t.txn for t in txns.values() for v in t.values}
    key_of_value: dict[str, str] = {}
    send_lines: dict[str, list[int]] = defaultdict(list)
    offset_of: dict[str, int] = {}                 # the read_uncommitted read's, else an ack's
    in_uncommitted: set[str] = set()
    committed_view: dict[str, dict[str, int]] = defaultdict(dict)  # key -> value -> offset
    committed_view_line: dict[str, int] = {}
    other_reads: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)
    rc_final: Event | None = None
    rc_final_line = 0
    rc_others: list[tuple[Event, int]] = []   # read_committed reads of the whole log before it
    for index, event in enumerate(events):
        line, f = _line(event, index), event.get("f")
        if f == "send" and event.get("txn") is not None:
            value = str(event["value"])
            key_of_value[value] = key_of(event["topic"], int(event["partition"]))
            send_lines[value].append(line)
            raw = event.get("offset")
            if event.get("type") == "ok" and raw is not None and int(raw) >= 0:
                offset_of.setdefault(value, int(raw))
        elif f == "poll":
            process = event.get("process")
            for topic, partition, offset, value in event.get("records", []):
                key, value = key_of(topic, int(partition)), str(value)
                if process == FINAL_PROCESS:
                    in_uncommitted.add(value)
                    offset_of[value] = int(offset)
                elif process == FINAL_COMMITTED_PROCESS:
                    committed_view[key][value] = int(offset)
                    committed_view_line.setdefault(value, line)
                elif event.get("isolation") == ISOLATION_READ_COMMITTED:
                    other_reads[value].append((key, int(offset), line, str(process)))
        elif f == "final" and event.get("process") == FINAL_COMMITTED_PROCESS:
            rc_final, rc_final_line = event, line
        elif f == "final" and event.get("isolation") == ISOLATION_READ_COMMITTED:
            rc_others.append((event, line))

    rc_hw: dict[str, int] = {}
    rc_reached: dict[str, int] = {}
    rc_lso: dict[str, int] = {}
    if rc_final is not None:
        for topic, partition, hw, *_low in rc_final.get("high_watermarks", []):
            rc_hw[key_of(topic, int(partition))] = int(hw)
        for topic, partition, offset in rc_final.get("reached", []):
            rc_reached[key_of(topic, int(partition))] = int(offset)
        for topic, partition, offset in rc_final.get("lso", []):
            rc_lso[key_of(topic, int(partition))] = int(offset)

    def whole(key: str) -> bool:
        return key in rc_hw and rc_reached.get(key, -1) >= rc_hw[key]

    def covered(value: str) -> bool:
        """The read_committed final read tells whether ``value`` is visible."""
        key = key_of_value.get(value)
        if key is None:
            return False
        if whole(key):
            return True
        offset = offset_of.get(value)
        return offset is not None and offset < rc_reached.get(key, -1)

    def visible(value: str) -> bool:
        key = key_of_value.get(value)
        return key is not None and value in committed_view.get(key, {})

    # -- lost commits, unseen ones ----------------------------------------------------------------
    for txn in txns.values():
        if txn.outcome != "committed":
            continue
        for value in txn.values:
            key = key_of_value.get(value, "?")
            if covered(value):
                if not visible(value):
                    found.add("lost_commit", {
                        "txn": txn.txn, "key": key, "value": value,
                        "offset": offset_of.get(value),
                        "in_read_uncommitted": value in in_uncommitted,
                        "lines": sorted({*send_lines[value], *txn.lines})})
            elif key not in rc_hw and not other_reads.get(value):
                # (in a partition the read_committed final read reported, ``stuck_lso``
                # counts it as blocked)
                found.add("unseen", {"kind": "committed", "txn": txn.txn, "key": key,
                                     "value": value, "offset": offset_of.get(value),
                                     "lines": sorted({*send_lines[value], *txn.lines})})

    # -- aborted reads (G1a) ----------------------------------------------------------------------
    reads: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)
    for key, view in committed_view.items():
        for value, offset in view.items():
            reads[value].append((key, offset, committed_view_line[value],
                                 FINAL_COMMITTED_PROCESS))
    for value, seen in other_reads.items():
        reads[value].extend(seen)
    for value in sorted(reads, key=lambda v: min(r[2] for r in reads[v])):
        txn_id = txn_of.get(value)
        if txn_id is None:
            continue
        txn, seen = txns[txn_id], reads[value]
        if txn.outcome == "aborted":
            kind = "aborted-txn"
        elif txn.outcome == "unknown" and covered(value) and not visible(value):
            kind = "read-then-vanished"
        else:
            continue
        found.add("aborted_read", {
            "kind": kind, "txn": txn.txn, "outcome": txn.outcome, "key": seen[0][0],
            "value": value, "offsets": sorted({r[1] for r in seen}),
            "processes": sorted({r[3] for r in seen}),
            "lines": sorted({*send_lines[value], *txn.lines, *(r[2] for r in seen)})})

    # -- torn transactions, and how unknown outcomes resolved --------------------------------------
    outcomes = {"committed": 0, "aborted": 0, "unknown": 0}
    unknown = {"visible": 0, "invisible": 0, "torn": 0, "not_covered": 0}
    for txn in txns.values():
        outcomes[txn.outcome] += 1
        if not txn.values or not all(covered(v) for v in txn.values):
            if txn.outcome == "unknown" and txn.values:
                unknown["not_covered"] += 1
            continue
        shown = [v for v in txn.values if visible(v)]
        if txn.outcome == "unknown":
            unknown["torn" if 0 < len(shown) < len(txn.values)
                    else "visible" if shown else "invisible"] += 1
        if 0 < len(shown) < len(txn.values):
            found.add("torn_transaction", {
                "txn": txn.txn, "outcome": txn.outcome, "visible": shown,
                "invisible": [v for v in txn.values if v not in shown],
                "keys": sorted({key_of_value.get(v, "?") for v in txn.values}),
                "lines": sorted({*txn.lines, *(n for v in txn.values for n in send_lines[v])})})

    # -- the last stable offset at the end (and in earlier whole-log reads) ----------------------
    for key in sorted(rc_hw):
        if whole(key):
            continue
        reached = rc_reached.get(key, -1)
        blocked = sum(1 for t in txns.values() if t.outcome == "committed" for v in t.values
                      if key_of_value.get(v) == key and not covered(v))
        found.add("stuck_lso", {
            "process": FINAL_COMMITTED_PROCESS, "key": key, "high_watermark": rc_hw[key],
            "reached": None if reached < 0 else reached, "lso": rc_lso.get(key),
            "committed_values_blocked": blocked, "lines": [rc_final_line]})
    for event, line in rc_others:
        ends = {key_of(t, int(p)): int(o) for t, p, o, *_ in event.get("reached", [])}
        lsos = {key_of(t, int(p)): int(o) for t, p, o, *_ in event.get("lso", [])}
        for topic, partition, hw, *_low in event.get("high_watermarks", []):
            key = key_of(topic, int(partition))
            if ends.get(key, -1) < int(hw):
                found.add("stuck_lso", {
                    "process": str(event.get("process")), "key": key, "high_watermark": int(hw),
                    "reached": ends.get(key), "lso": lsos.get(key), "lines": [line]})

    committed_values = sum(len(t.values) for t in txns.values() if t.outcome == "committed")
    stats = {**outcomes, "unknown_resolved": unknown, "committed_values": committed_values,
             "read_committed": sum(len(v) for v in committed_view.values())}
    final = {**base.final, "read_committed": {
        "complete": bool(rc_final is not None and rc_final.get("complete")),
        "high_watermarks": dict(sorted(rc_hw.items())),
        "reached": dict(sorted(rc_reached.items())),
        **({"lso": dict(sorted(rc_lso.items()))} if rc_lso else {})}}
    return CheckResult(
        valid=not any(found.counts.values()), acknowledged=base.acknowledged,
        attempted=base.attempted, read=base.read, anomalies=found.lists, counts=found.counts,
        final=final, transactions=stats, duplicates=base.duplicates)
