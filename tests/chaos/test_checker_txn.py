"""The transactional checker (``check_txn``, Jepsen's queue with transactions) on small
hand-written histories: one per anomaly, and clean ones.

The histories look like the workload's: a transaction's sends carry ``txn``; its ``commit`` or
``abort`` is an invoke and a completion; the final read is done twice, ``final`` with
read_uncommitted and ``final-rc`` with read_committed, each ending at its end-of-partition event
(``reached``), and offsets are sparse (markers take offsets no consumer sees).
"""

from __future__ import annotations

from typing import Any

from floodmark.chaos.checker import check_txn, transactions

T = "t"
Send = tuple[str, int, "int | None"]   # value, partition, offset (None: not acknowledged)


def txn(process: str, txn_id: str, sends: list[Send], end: str = "commit"
        ) -> list[dict[str, Any]]:
    """A transaction's lines. ``end``: ``commit`` (ok), ``abort`` (ok), ``commit-unknown``
    (the commit came back with an error, nothing after), ``commit-then-abort`` (the commit
    failed, the abort came back ok), ``none`` (no end call: the producer crashed)."""
    h: list[dict[str, Any]] = [{"process": process, "type": "ok", "f": "begin", "txn": txn_id}]
    for value, partition, _offset in sends:
        h.append({"process": process, "type": "invoke", "f": "send", "topic": T,
                  "partition": partition, "value": value, "txn": txn_id})
    for value, partition, offset in sends:
        done: dict[str, Any] = {"process": process, "f": "send", "topic": T,
                                "partition": partition, "value": value, "txn": txn_id}
        if offset is None:
            done.update(type="info", error="_MSG_TIMED_OUT")
        else:
            done.update(type="ok", offset=offset)
        h.append(done)
    values = [v for v, _p, _o in sends]

    def call(f: str, ok: bool) -> list[dict[str, Any]]:
        out = {"process": process, "type": "ok" if ok else "info", "f": f, "txn": txn_id}
        if not ok:
            out.update(error="_TIMED_OUT", retriable=True, abortable=False, fatal=False)
        return [{"process": process, "type": "invoke", "f": f, "txn": txn_id,
                 "values": values}, out]

    if end == "commit":
        h += call("commit", True)
    elif end == "abort":
        h += call("abort", True)
    elif end == "commit-unknown":
        h += call("commit", False)
    elif end == "commit-then-abort":
        h += call("commit", False) + call("abort", True)
    elif end != "none":
        raise ValueError(end)
    if end in ("commit-unknown", "none"):
        h.append({"process": process, "type": "info", "f": "crash", "error": "rebuilt"})
    return h


def poll(process: str, *records: tuple[int, int, str], isolation: str = "read_committed"
         ) -> dict[str, Any]:
    """records: (partition, offset, value)."""
    return {"process": process, "type": "ok", "f": "poll", "isolation": isolation,
            "records": [[T, p, o, v] for p, o, v in records]}


def assign(process: str) -> dict[str, Any]:
    return {"process": process, "type": "ok", "f": "assign", "partitions": [[T, 0], [T, 1]]}


def final(ru: list[tuple[int, int, str]], rc: list[tuple[int, int, str]],
          hw: dict[int, int], reached_rc: dict[int, int] | None = None,
          lso: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Both final reads; ``hw`` per partition; read_committed reaches ``reached_rc`` (default:
    the high watermark)."""
    reached = dict(hw) if reached_rc is None else reached_rc
    marks = [[T, p, h, 0] for p, h in sorted(hw.items())]
    out: list[dict[str, Any]] = []
    if ru:
        out.append(poll("final", *ru, isolation="read_uncommitted"))
    out.append({"process": "final", "type": "ok", "f": "final", "complete": True,
                "high_watermarks": marks, "isolation": "read_uncommitted",
                "reached": [[T, p, h] for p, h in sorted(hw.items())]})
    if rc:
        out.append(poll("final-rc", *rc))
    rc_done: dict[str, Any] = {
        "process": "final-rc", "type": "ok", "f": "final",
        "complete": all(reached.get(p, -1) >= h for p, h in hw.items()),
        "high_watermarks": marks, "isolation": "read_committed",
        "reached": [[T, p, o] for p, o in sorted(reached.items())]}
    if lso:
        rc_done["lso"] = [[T, p, o] for p, o in sorted(lso.items())]
    out.append(rc_done)
    return out


def bad(result: Any) -> dict[str, int]:
    return {k: v for k, v in result.counts.items() if v}


# Two transactions on partitions 0 and 1: t1 commits a (p0 @0) and b (p1 @0), markers at p0 @1
# and p1 @1; t2 aborts c (p0 @2), marker at p0 @3. The log: p0 = a, C, c, A; p1 = b, C.
COMMITTED = txn("tp1", "tp1-t0", [("a", 0, 0), ("b", 1, 0)])
ABORTED = txn("tp1", "tp1-t1", [("c", 0, 2)], end="abort")
RU = [(0, 0, "a"), (0, 2, "c"), (1, 0, "b")]
RC = [(0, 0, "a"), (1, 0, "b")]
HW = {0: 4, 1: 2}


def test_clean_history_is_valid_with_sparse_offsets() -> None:
    h = [*COMMITTED, *ABORTED, assign("ca1"), poll("ca1", (0, 0, "a")), *final(RU, RC, HW)]
    result = check_txn(h)
    assert result.valid, bad(result)
    assert result.transactions["committed"] == 1 and result.transactions["aborted"] == 1
    assert result.final["complete"] and result.final["read_committed"]["complete"]
    assert result.acknowledged == 3  # an aborted transaction's records are acknowledged too


def test_lost_commit() -> None:
    """The bug of issue 28: the log has the committed record (read_uncommitted sees it), the
    aborted-transaction index says otherwise, so read_committed does not."""
    h = [*COMMITTED, *ABORTED, *final(RU, [(1, 0, "b")], HW)]
    result = check_txn(h)
    assert [x["value"] for x in result.anomalies["lost_commit"]] == ["a"]
    example = result.anomalies["lost_commit"][0]
    assert example["in_read_uncommitted"] and example["txn"] == "tp1-t0"
    assert [x["txn"] for x in result.anomalies["torn_transaction"]] == ["tp1-t0"]
    assert result.counts["lost"] == 0  # read_uncommitted has every acknowledged value


def test_aborted_read_g1a() -> None:
    """An aborted transaction's value read with read_committed: by the final read and by a
    consumer during the run."""
    h = [*COMMITTED, *ABORTED, assign("ca1"), poll("ca1", (0, 0, "a"), (0, 2, "c")),
         *final(RU, [*RC, (0, 2, "c")], HW)]
    result = check_txn(h)
    assert [(x["kind"], x["value"]) for x in result.anomalies["aborted_read"]] == [
        ("aborted-txn", "c")]
    assert result.anomalies["aborted_read"][0]["processes"] == ["ca1", "final-rc"]
    assert not result.valid


def test_a_transaction_never_committed_is_aborted() -> None:
    """A producer that crashed before asking to commit: only commit_transaction commits, so its
    values must never be visible to read_committed."""
    h = [*txn("tp1", "tp1-t0", [("a", 0, 0)], end="none"),
         *final([(0, 0, "a")], [(0, 0, "a")], {0: 2})]
    assert transactions(h)["tp1-t0"].outcome == "aborted"
    result = check_txn(h)
    assert [x["value"] for x in result.anomalies["aborted_read"]] == ["a"]


def test_outcomes_commit_error_then_abort_ok_is_aborted_commit_error_alone_unknown() -> None:
    h = [*txn("tp1", "tp1-t0", [("a", 0, 0)], end="commit-then-abort"),
         *txn("tp1", "tp1-t1", [("b", 0, 2)], end="commit-unknown")]
    txns = transactions(h)
    assert txns["tp1-t0"].outcome == "aborted" and txns["tp1-t1"].outcome == "unknown"


def test_unknown_outcomes_resolve_all_or_nothing() -> None:
    visible = txn("tp1", "tp1-t0", [("a", 0, 0), ("b", 1, 0)], end="commit-unknown")
    invisible = txn("tp2", "tp2-t0", [("c", 0, 2), ("d", 1, 2)], end="commit-unknown")
    torn = txn("tp3", "tp3-t0", [("e", 0, 4), ("f", 1, 4)], end="commit-unknown")
    ru = [(0, 0, "a"), (0, 2, "c"), (0, 4, "e"), (1, 0, "b"), (1, 2, "d"), (1, 4, "f")]
    rc = [(0, 0, "a"), (1, 0, "b"), (0, 4, "e")]
    result = check_txn([*visible, *invisible, *torn, *final(ru, rc, {0: 6, 1: 6})])
    assert result.transactions["unknown"] == 3
    assert result.transactions["unknown_resolved"] == {
        "visible": 1, "invisible": 1, "torn": 1, "not_covered": 0}
    assert [(x["txn"], x["outcome"], x["visible"], x["invisible"])
            for x in result.anomalies["torn_transaction"]] == [
        ("tp3-t0", "unknown", ["e"], ["f"])]
    assert bad(result) == {"torn_transaction": 1}


def test_read_then_vanished() -> None:
    """A value of a transaction whose outcome is unknown, read with read_committed during the
    run, is gone at the end: someone read what was aborted."""
    h = [*txn("tp1", "tp1-t0", [("a", 0, 0)], end="commit-unknown"), assign("ca1"),
         poll("ca1", (0, 0, "a")), *final([(0, 0, "a")], [], {0: 2})]
    result = check_txn(h)
    assert [(x["kind"], x["value"]) for x in result.anomalies["aborted_read"]] == [
        ("read-then-vanished", "a")]


def test_duplicates_in_read_committed() -> None:
    h = [*COMMITTED, *ABORTED, *final(RU, [*RC, (1, 1, "b")], HW)]
    result = check_txn(h)
    assert [x["value"] for x in result.anomalies["duplicated"]] == ["b"]


def test_read_uncommitted_missing_an_acknowledged_value() -> None:
    """Every acknowledged record is in the log, an aborted transaction's too: ``lost``."""
    h = [*COMMITTED, *ABORTED, *final([(0, 0, "a"), (1, 0, "b")], RC, HW)]
    result = check_txn(h)
    assert [x["value"] for x in result.anomalies["lost"]] == ["c"]
    assert result.counts["aborted_read"] == 0


def test_stuck_lso_blocks_without_losing() -> None:
    """read_committed stops at an LSO below the high watermark: what lies above is blocked
    (``stuck_lso``), not lost; what lies below is still checked."""
    later = txn("tp2", "tp2-t0", [("d", 0, 5)])
    ru = [*RU, (0, 5, "d")]
    h = [*COMMITTED, *ABORTED, *later, *final(ru, RC, {0: 7, 1: 2}, reached_rc={0: 4, 1: 2},
                                               lso={0: 4})]
    result = check_txn(h)
    assert bad(result) == {"stuck_lso": 1}
    stuck = result.anomalies["stuck_lso"][0]
    assert (stuck["key"], stuck["high_watermark"], stuck["reached"], stuck["lso"],
            stuck["committed_values_blocked"]) == ("t-0", 7, 4, 4, 1)
    below = [*COMMITTED, *ABORTED, *later,
             *final(ru, [(1, 0, "b")], {0: 7, 1: 2}, reached_rc={0: 4, 1: 2})]
    assert [x["value"] for x in check_txn(below).anomalies["lost_commit"]] == ["a"]


def test_read_committed_polls_skip_aborted_records_but_not_committed_ones() -> None:
    """A read_committed consumer jumps over aborted records and markers (no poll skip); one that
    jumps over a committed record does skip."""
    later = txn("tp1", "tp1-t2", [("e", 0, 4)])
    ru = [*RU, (0, 4, "e")]
    rc = [*RC, (0, 4, "e")]
    fine = [*COMMITTED, *ABORTED, *later, assign("ca1"), poll("ca1", (0, 0, "a")),
            poll("ca1", (0, 4, "e")), *final(ru, rc, {0: 6, 1: 2})]
    assert check_txn(fine).valid, bad(check_txn(fine))
    skipped = [*COMMITTED, *ABORTED, *later, assign("ca1"), poll("ca1", (1, 0, "b")),
               poll("ca1", (0, 4, "e")), poll("ca1", (0, 0, "a")),
               *final(ru, rc, {0: 6, 1: 2})]
    kinds = [x["kind"] for x in check_txn(skipped).anomalies["nonmonotonic"]]
    assert kinds == ["nonmonotonic-poll"]
    jump = [*COMMITTED, *ABORTED, *later, assign("ca1"), poll("ca1", (0, 0, "a"), (0, 4, "e")),
            *final(ru, rc, {0: 6, 1: 2})]
    assert check_txn(jump).valid
    missed = [*COMMITTED, *ABORTED, *later, *txn("tp2", "tp2-t0", [("f", 0, 5)]),
              assign("ca1"), poll("ca1", (0, 0, "a"), (0, 5, "f")),
              *final([*ru, (0, 5, "f")], [*rc, (0, 5, "f")], {0: 7, 1: 2})]
    assert [x["skipped"] for x in check_txn(missed).anomalies["poll_skip"]] == [4]


def test_markers_are_not_replica_divergence() -> None:
    """Replicas' data records (markers left out) agree with the read_uncommitted read."""
    h = [*COMMITTED, *ABORTED, *final(RU, RC, HW)]
    same = {"t-0": {1: {0: "a", 2: "c"}, 2: {0: "a", 2: "c"}}, "t-1": {1: {0: "b"}}}
    assert check_txn(h, same, {"t-0": [1, 2], "t-1": [1]}).valid
    other = {"t-0": {1: {0: "a", 2: "z"}}}
    result = check_txn(h, other, {"t-0": [1]})
    assert [(x["broker"], x["offset"]) for x in result.anomalies["replicas_diverged"]] == [(1, 2)]


def live_reads(ru: list[tuple[int, int, str]], rc: list[tuple[int, int, str]],
               hw: dict[int, int], reached_rc: dict[int, int] | None = None
               ) -> list[dict[str, Any]]:
    """The whole-log reads before the final restart (processes ``live`` and ``live-rc``)."""
    out = final(ru, rc, hw, reached_rc)
    for event in out:
        event["process"] = {"final": "live", "final-rc": "live-rc"}[event["process"]]
    return out


def test_a_commit_visible_before_the_restarts_and_lost_after() -> None:
    """Issue 28 as the run shows it: read_committed has the value before every broker is
    restarted, not after (the rebuilt index); the read before is an ordinary read."""
    h = [*COMMITTED, *ABORTED, *live_reads(RU, RC, HW), *final(RU, [(1, 0, "b")], HW)]
    result = check_txn(h)
    assert [x["value"] for x in result.anomalies["lost_commit"]] == ["a"]
    h = [*COMMITTED, *ABORTED, *live_reads(RU, RC, HW), *final(RU, [*RC, (0, 2, "c")], HW)]
    result = check_txn(h)
    assert [(x["value"], x["processes"]) for x in result.anomalies["aborted_read"]] == [
        ("c", ["final-rc"])]


def test_a_stuck_lso_before_the_restarts_counts_too() -> None:
    h = [*COMMITTED, *ABORTED, *live_reads(RU, [(1, 0, "b")], HW, reached_rc={0: 0, 1: 2}),
         *final(RU, RC, HW)]
    result = check_txn(h)
    assert [(x["process"], x["key"], x["reached"]) for x in result.anomalies["stuck_lso"]] == [
        ("live-rc", "t-0", 0)]
    assert bad(result) == {"stuck_lso": 1}
