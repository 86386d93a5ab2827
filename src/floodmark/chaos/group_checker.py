"""The consumer-group workload's checks (``--workload group``): Jepsen's queue, one group.

Pure: the merged history in, a verdict out. ``check_group`` runs ``checker.check`` (the
producers, the final read, the replicas) and then judges the group members' history lines
(``floodmark.chaos.group_member``):

* ``rebalance`` ``ok`` (``group``, ``generation``, ``member``, ``assigned``) opens one member's
  *assignment span*; ``revoke``, ``lost``, ``leave``, ``crash``, ``subscribe`` or the next
  ``rebalance`` of the same process closes it;
* ``poll`` ``ok`` with ``group``: the records delivered to the member;
* ``commit`` ``invoke`` (``id``, ``mode`` sync/async, ``offsets`` = ``[[topic, partition,
  offset], ...]``, the next offset to consume) and its completion (``ok``, ``fail`` when the
  coordinator refused it, ``info`` when the outcome is unknown);
* ``committed`` ``ok`` (process ``group-final``): the group's committed offsets at the end.

A commit *happened before* an event when its ``ok`` line comes before that event's line (the
history is merged by wall-clock time on one machine). Anomalies, each with the lines proving it:

* ``lost_committed`` — a record of the final log below an offset the group committed (``ok``)
  that no member was ever given: the group moved past it unread;
* ``rewound`` — a member's first record of a partition in an assignment span is below what the
  group had committed (``ok``) before the span began: the consumer was moved backwards past
  what its group committed;
* ``redelivered`` — a record delivered again, in a later span, although a commit past its
  offset had come back ``ok`` before that span began (at-least-once allows a record to come
  again only from the last committed offset; those re-deliveries are counted, not reported);
* ``nonmonotonic`` (kind ``group-nonmonotonic-poll``) and ``poll_skip`` (kind
  ``group-poll-skip``) — from one poll to the next inside one assignment span, a partition's
  offsets went backwards, or jumped over an offset the version order has;
* ``commit_backwards`` — an ``ok`` commit of a partition below one that came back ``ok`` before
  it was asked for (kind ``commit``), or the group's committed offset at the end below the
  highest ``ok`` commit (kind ``final``; ``committed`` None: the group forgot it);
* ``split_ownership`` — two members assigned one partition in one generation (below).

**Ownership under each protocol.** A classic member's ``rebalance`` line carries the group's
``generation`` (eager: the whole assignment, once per generation). A KIP-848 member's carries
``member_epoch`` (``generation`` None): each increment or revocation is a span of its own, with
the epoch read when its callback ran. Both count on one number line: the member epoch is the
group epoch at which the member's assignment was reconciled, and the coordinator gives a
partition to a member only once its previous owner has acknowledged its revocation, at a later
epoch (KIP-848); a classic member of a consumer group is answered JoinGroup with its member
epoch as its generation; an upgrade makes the classic generation the group epoch and every
member's epoch, with the partitions it had; a downgrade makes the group epoch the classic
generation, then rebalances. So a partition has at most one owner per generation or epoch
(``Span.epoch``). Where only classic members took part a generation is never reused, and two
owners of one (generation, partition) are an anomaly whenever they came. Where KIP-848 members
took part, a group that empties and is re-created by the other protocol starts its epochs over
(Kafka's coordinator does the same), so two owners count only when their spans were open at
once (a span ends at the line that closes it, else at its process's last line).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from floodmark.chaos.checker import (
    FINAL_PROCESS,
    MAX_EXAMPLES,
    CheckResult,
    Event,
    Replicas,
    check,
    key_of,
)

GROUP_ANOMALIES = ("lost_committed", "rewound", "redelivered", "commit_backwards",
                   "split_ownership")
GROUP_FINAL_PROCESS = "group-final"
# history events that end a member's assignment span
SPAN_ENDS = frozenset({"revoke", "lost", "leave", "crash", "subscribe", "rebalance"})


@dataclass
class Span:
    """One member's assignment: from a ``rebalance`` to whatever ends it."""

    process: str
    member: str
    generation: int | None
    line: int
    assigned: frozenset[str]
    first: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> offset, line
    last: dict[str, tuple[int, int]] = field(default_factory=dict)
    member_epoch: int | None = None  # a KIP-848 member's (its ``generation`` is None)
    end: int | None = None  # the line that closed it (None: its process's last line)

    @property
    def epoch(self) -> int | None:
        """What its ownership is judged by: the generation, else the member epoch."""
        return self.generation if self.generation is not None else self.member_epoch


@dataclass(frozen=True)
class Commit:
    process: str
    key: str
    offset: int
    invoke_line: int
    ok_line: int
    mode: str
    generation: int | None


class _Committed:
    """Every ``ok`` commit of one partition, in the order their ``ok`` lines came, and the
    group's committed offset after each: the highest so far, except where a member's own
    commits came back out of the order it asked for them (``reordered``).

    A classic coordinator stores OffsetCommits in the order they reach it, with no rule against
    a lower offset (Kafka's neither). When a member asks for commit A, then for a higher B, A
    comes back ``ok`` after B, and the coordinator's log (``stored``: the offsets in the order
    ``__consumer_offsets`` holds them) has A after B, the client sent A after B (librdkafka
    re-sends a timed-out commit behind a newer one, docs/chaos.md): the group's committed offset
    is then A's, because its own member asked for that last. The ``ok`` order alone proves
    nothing (an asynchronous commit's callback is served at a later poll), so without the log
    every lower commit leaves the highest in place, as it does for any other member's."""

    def __init__(self, commits: list[Commit], stored: Sequence[int] | None = None) -> None:
        self.commits = sorted(commits, key=lambda c: c.ok_line)
        self.lines = [c.ok_line for c in self.commits]
        self.reordered: list[tuple[Commit, Commit]] = []  # (the late lower one, the higher one)
        best: list[Commit] = []
        top: Commit | None = None
        for c in self.commits:
            prev = best[-1] if best else None
            if (prev is not None and c.offset < prev.offset and prev.process == c.process
                    and prev.invoke_line > c.invoke_line
                    and _stored_after(stored, prev.offset, c.offset)):
                best.append(c)
                self.reordered.append((c, prev))
            else:
                best.append(c if prev is None or c.offset > prev.offset else prev)
            top = c if top is None or c.offset > top.offset else top
        self.best = best
        self.top = top

    def before(self, line: int) -> Commit | None:
        """The group's committed offset (its commit) as of ``line``: the highest ``ok`` commit
        before it, or a member's own reordered lower one (above)."""
        i = bisect.bisect_left(self.lines, line)
        return self.best[i - 1] if i else None

    def last(self) -> Commit | None:
        """The group's committed offset after every ``ok`` commit."""
        return self.best[-1] if self.best else None

    def highest(self) -> Commit | None:
        """The highest offset ever committed ``ok``."""
        return self.top


def _stored_after(stored: Sequence[int] | None, first: int, then: int) -> bool:
    """Does the coordinator's log hold ``first`` and, later, ``then``?"""
    if stored is None or first not in stored:
        return False
    return then in stored[stored.index(first) + 1:]


def _line(event: Event, index: int) -> int:
    return int(event.get("line", index + 1))


def _add(anomalies: dict[str, list[dict[str, Any]]], counts: dict[str, int], name: str,
         example: dict[str, Any]) -> None:
    counts[name] = counts.get(name, 0) + 1
    examples = anomalies.setdefault(name, [])
    if len(examples) < MAX_EXAMPLES:
        examples.append(example)


def _commit_example(c: Commit) -> dict[str, Any]:
    return {"process": c.process, "offset": c.offset, "mode": c.mode,
            "generation": c.generation, "lines": [c.invoke_line, c.ok_line]}


def check_group(events: Sequence[Event], replicas: Replicas | None = None,
                in_sync: Mapping[str, Sequence[int]] | None = None, *,
                group: str | None = None,
                stored_commits: Mapping[str, Sequence[int]] | None = None) -> CheckResult:
    """``check`` plus the group checks above, for the members of ``group`` (default: every
    member line's group). ``stored_commits``: per partition, the offsets the group's
    coordinator stored, in its log's order (``nodes.read_stored_commits``; see ``_Committed``)."""
    base = check(events, replicas, in_sync)
    anomalies = {name: list(examples) for name, examples in base.anomalies.items()}
    counts = dict(base.counts)
    for name in GROUP_ANOMALIES:
        anomalies.setdefault(name, [])
        counts.setdefault(name, 0)

    def ours(event: Event) -> bool:
        return event.get("group") is not None and (group is None or event["group"] == group)

    # -- one pass: spans, deliveries, commits --------------------------------------------------
    spans: list[Span] = []
    open_span: dict[str, Span | None] = {}
    # (key, offset) -> [(line, span or None, value)]
    deliveries: dict[tuple[str, int], list[tuple[int, Span | None, str]]] = defaultdict(list)
    delivered_values: set[str] = set()
    invokes: dict[tuple[str, Any], tuple[int, str, list[list[Any]], int | None]] = {}
    commits: dict[str, list[Commit]] = defaultdict(list)
    outcomes = {"ok": 0, "fail": 0, "info": 0}
    final_committed: dict[str, int | None] | None = None
    final_committed_line = 0
    final_log: dict[str, dict[int, str]] = defaultdict(dict)
    last_line: dict[str, int] = {}  # process -> its last line
    known: dict[str, set[int]] = defaultdict(set)
    issues: list[tuple[str, dict[str, Any]]] = []

    for index, event in enumerate(events):
        line = _line(event, index)
        f, type_, process = event.get("f"), event.get("type"), str(event.get("process"))
        last_line[process] = line
        if f == "poll":
            for topic, partition, offset, value in event.get("records", []):
                known[key_of(topic, int(partition))].add(int(offset))
                if process == FINAL_PROCESS:
                    final_log[key_of(topic, int(partition))][int(offset)] = str(value)
        elif (f == "send" and type_ == "ok" and event.get("offset") is not None
              and int(event["offset"]) >= 0):
            known[key_of(event["topic"], int(event["partition"]))].add(int(event["offset"]))
        if f == "committed" and type_ == "ok" and process == GROUP_FINAL_PROCESS and ours(event):
            final_committed = {key_of(t, int(p)): (None if o is None or int(o) < 0 else int(o))
                               for t, p, o in event.get("offsets", [])}
            final_committed_line = line
            continue
        if not ours(event):
            continue
        if f in SPAN_ENDS:
            closed = open_span.get(process)
            if closed is not None:
                closed.end = line
            open_span[process] = None
        if f == "rebalance" and type_ == "ok":
            generation, member_epoch = event.get("generation"), event.get("member_epoch")
            opened = Span(process, str(event.get("member")),
                          None if generation is None else int(generation), line,
                          frozenset(key_of(t, int(p)) for t, p in event.get("assigned", [])),
                          member_epoch=None if member_epoch is None else int(member_epoch))
            spans.append(opened)
            open_span[process] = opened
        elif f == "poll" and type_ == "ok":
            span = open_span.get(process)
            seen_here: set[str] = set()
            for topic, partition, offset, value in event.get("records", []):
                key, offset = key_of(topic, int(partition)), int(offset)
                deliveries[(key, offset)].append((line, span, str(value)))
                delivered_values.add(str(value))
                if span is None:
                    continue
                if key not in seen_here and key in span.last:
                    prev, prev_line = span.last[key]
                    lines = [prev_line, line]
                    if offset <= prev:
                        issues.append(("nonmonotonic", {
                            "kind": "group-nonmonotonic-poll", "process": process,
                            "generation": span.generation, "key": key,
                            "offsets": [prev, offset], "lines": lines}))
                    elif offset > prev + 1:  # judged once every offset is known
                        issues.append(("poll_skip", {
                            "kind": "group-poll-skip", "process": process,
                            "generation": span.generation, "key": key,
                            "offsets": [prev, offset], "lines": lines}))
                seen_here.add(key)
                span.first.setdefault(key, (offset, line))
                span.last[key] = (offset, line)
        elif f == "commit":
            cid = (process, event.get("id"))
            if type_ == "invoke":
                generation = event.get("generation")
                invokes[cid] = (line, str(event.get("mode", "sync")),
                                list(event.get("offsets", [])),
                                None if generation is None else int(generation))
                continue
            if type_ in outcomes:
                outcomes[str(type_)] += 1
            if type_ != "ok":
                continue
            invoke_line, mode, offsets, generation = invokes.get(
                cid, (line, str(event.get("mode", "async")), [], None))
            for topic, partition, offset in event.get("offsets") or offsets:
                if offset is None or int(offset) < 0:
                    continue
                commits[key_of(topic, int(partition))].append(Commit(
                    process, key_of(topic, int(partition)), int(offset), invoke_line, line,
                    mode, generation))

    # (a skip needs every known offset: a later acknowledgement or read can name the offset a
    # poll jumped over)
    positions_of = {key: sorted(offsets) for key, offsets in known.items()}
    for name, example in issues:
        if name == "poll_skip":
            positions = positions_of.get(example["key"], [])
            prev, offset = example["offsets"]
            i = bisect.bisect_right(positions, prev)
            if not (i < len(positions) and positions[i] < offset):
                continue
            example["skipped"] = positions[i]
        _add(anomalies, counts, name, example)

    committed = {key: _Committed(cs, None if stored_commits is None else stored_commits.get(key))
                 for key, cs in commits.items()}

    # -- split ownership (see "Ownership under each protocol" above) --------------------------
    for span in spans:
        if span.end is None:
            span.end = last_line.get(span.process, span.line)
    for name, example in _split_ownership(spans):
        _add(anomalies, counts, name, example)

    # -- rewound: a span's first record below what was committed before it began ---------------
    for span in spans:
        for key, (offset, line) in sorted(span.first.items()):
            before = committed[key].before(span.line) if key in committed else None
            if before is not None and offset < before.offset:
                _add(anomalies, counts, "rewound", {
                    "process": span.process, "member": span.member,
                    "generation": span.generation, "key": key, "first_offset": offset,
                    "committed": _commit_example(before),
                    "lines": sorted({*_commit_lines(before), span.line, line})})

    # -- redeliveries beyond at-least-once ----------------------------------------------------
    allowed = 0
    for (key, offset), seen in sorted(deliveries.items()):
        if len(seen) < 2:
            continue
        seen = sorted(seen, key=lambda s: s[0])
        spans_seen: list[Span | None] = [seen[0][1]]
        for line, again, value in seen[1:]:
            if again is not None and any(again is s for s in spans_seen):
                continue  # the same span again: a nonmonotonic poll, reported above
            spans_seen.append(again)
            start = again.line if again is not None else line
            before = committed[key].before(start) if key in committed else None
            if before is not None and before.offset > offset:
                _add(anomalies, counts, "redelivered", {
                    "key": key, "offset": offset, "value": value,
                    "process": again.process if again else None,
                    "generation": again.generation if again else None,
                    "committed": _commit_example(before),
                    "lines": sorted({seen[0][0], *_commit_lines(before), start, line})})
            else:
                allowed += 1

    # -- lost: committed past, never delivered ------------------------------------------------
    for key, log in sorted(final_log.items()):
        top = committed[key].highest() if key in committed else None
        if top is None:
            continue
        for offset, value in sorted(log.items()):
            if offset >= top.offset:
                break
            if value not in delivered_values:
                _add(anomalies, counts, "lost_committed", {
                    "key": key, "offset": offset, "value": value,
                    "committed": _commit_example(top), "lines": _commit_lines(top)})

    # -- committed offsets going backwards ----------------------------------------------------
    for key, history in sorted(committed.items()):
        for c in history.commits:
            before = history.before(c.invoke_line)
            if before is not None and c.offset < before.offset:
                _add(anomalies, counts, "commit_backwards", {
                    "kind": "commit", "key": key, "offset": c.offset,
                    "process": c.process, "generation": c.generation, "mode": c.mode,
                    "earlier": _commit_example(before),
                    "lines": sorted({*_commit_lines(before), c.invoke_line, c.ok_line})})
        top = history.last()
        if final_committed is not None and top is not None:
            at_end = final_committed.get(key)
            if at_end is None or at_end < top.offset:
                _add(anomalies, counts, "commit_backwards", {
                    "kind": "final", "key": key, "committed": at_end,
                    "highest": _commit_example(top),
                    "lines": sorted({*_commit_lines(top), final_committed_line})})

    reordered = [(low, high) for history in committed.values() for low, high in history.reordered]
    stats = {
        "spans": len(spans),
        # assignment spans of classic members (a generation) and of KIP-848 members
        "spans_by_protocol": {
            "classic": sum(1 for s in spans if s.generation is not None),
            "consumer": sum(1 for s in spans if s.generation is None
                            and s.member_epoch is not None)},
        "generations": len({s.generation for s in spans if s.generation is not None}),
        "deliveries": sum(len(v) for v in deliveries.values()),
        "redelivered_allowed": allowed,
        "commits": outcomes,
        # a member's commits that came back out of the order it asked for them (not anomalies:
        # the coordinator stored what its member asked for last; see _Committed)
        "client_reordered_commits": len(reordered),
        "client_reordered_examples": [
            {"key": low.key, "process": low.process, "later_lower": _commit_example(low),
             "earlier_higher": _commit_example(high)} for low, high in reordered[:MAX_EXAMPLES]],
        "committed_at_end": (None if final_committed is None
                             else dict(sorted(final_committed.items()))),
        # records of the final log above what the group committed at the end (a liveness
        # figure: how far the group was behind when the run stopped it; not an anomaly)
        "lag_at_end": None if final_committed is None else sum(
            max(0, int(hw) - (final_committed.get(key) or 0))
            for key, hw in base.final.get("high_watermarks", {}).items()),
    }
    return CheckResult(
        valid=not any(counts.values()), acknowledged=base.acknowledged,
        attempted=base.attempted, read=base.read, anomalies=anomalies, counts=counts,
        final=base.final, group=stats)


def _commit_lines(c: Commit) -> list[int]:
    return [c.invoke_line, c.ok_line]


def _split_ownership(spans: Sequence[Span]) -> list[tuple[str, dict[str, Any]]]:
    """Two members owning one partition in one generation or epoch: ever, where only classic
    members took part; at once (their spans overlapping) where KIP-848 members did."""
    at_once = any(s.generation is None and s.member_epoch is not None for s in spans)
    held: dict[tuple[int, str], list[Span]] = defaultdict(list)
    for span in spans:
        if span.epoch is not None:
            for key in span.assigned:
                held[(span.epoch, key)].append(span)
    out: list[tuple[str, dict[str, Any]]] = []
    for (epoch, key), owners in sorted(held.items()):
        if len({s.member for s in owners}) < 2:
            continue
        if not at_once:
            first: dict[str, int] = {}
            for s in owners:
                first.setdefault(s.member, s.line)
            out.append(("split_ownership", {"generation": epoch, "key": key,
                                            "members": sorted(first),
                                            "lines": sorted(first.values())}))
            continue
        both = [(a, b) for i, a in enumerate(owners) for b in owners[i + 1:]
                if a.member != b.member and a.line <= (b.end or b.line)
                and b.line <= (a.end or a.line)]
        if both:
            a, b = both[0]
            out.append(("split_ownership", {
                "generation": epoch, "key": key, "at_once": True,
                "members": sorted({a.member, b.member}),
                "processes": sorted({a.process, b.process}),
                "lines": sorted({a.line, a.end or a.line, b.line, b.end or b.line})}))
    return out
