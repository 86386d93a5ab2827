"""The chaos checker on small hand-written histories: one per anomaly, and clean ones."""

from __future__ import annotations

from typing import Any

from floodmark.chaos.checker import check

T = "t"


def send(process: str, value: str, partition: int = 0, offset: int | None = None,
         type_: str = "ok") -> list[dict[str, Any]]:
    done: dict[str, Any] = {"process": process, "type": type_, "f": "send", "topic": T,
                            "partition": partition, "value": value}
    if offset is not None:
        done["offset"] = offset
    return [{"process": process, "type": "invoke", "f": "send", "topic": T,
             "partition": partition, "value": value}, done]


def poll(process: str, *records: tuple[int, str], partition: int = 0,
         hw: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"process": process, "type": "ok", "f": "poll",
                             "records": [[T, partition, o, v] for o, v in records]}
    if hw is not None:
        event["hw"] = [[T, partition, hw]]
    return event


def assign(process: str) -> dict[str, Any]:
    return {"process": process, "type": "ok", "f": "assign", "partitions": [[T, 0]]}


def final(*records: tuple[int, str], hw: int | None = None, complete: bool = True
          ) -> list[dict[str, Any]]:
    hw = len(records) if hw is None else hw
    return [poll("final", *records, hw=hw),
            {"process": "final", "type": "ok", "f": "final", "complete": complete,
             "high_watermarks": [[T, 0, hw]]}]


def bad(result: Any) -> dict[str, int]:
    return {k: v for k, v in result.counts.items() if v}


def test_clean_history_is_valid() -> None:
    h = [*send("p", "a", offset=0), *send("p", "b", offset=1), assign("c"),
         poll("c", (0, "a"), hw=2), poll("c", (1, "b"), hw=2), *final((0, "a"), (1, "b"))]
    result = check(h)
    assert result.valid, bad(result)
    assert result.acknowledged == 2 and result.attempted == 2


def test_lost_acknowledged_write() -> None:
    h = [*send("p", "a", offset=0), *send("p", "b", offset=1), *final((0, "a"))]
    result = check(h)
    assert not result.valid
    assert [x["value"] for x in result.anomalies["lost"]] == ["b"]
    assert result.anomalies["lost"][0]["lines"] == [3, 4]  # its invoke and its ack


def test_read_then_vanished_was_read_beyond_the_high_watermark() -> None:
    h = [*send("p", "a", type_="info"), assign("c"), poll("c", (0, "a"), hw=1), *final(hw=0)]
    result = check(h)
    assert [x["value"] for x in result.anomalies["read_beyond_hw"]] == ["a"]
    assert result.counts["lost"] == 0
    acked = [*send("p", "a", offset=0), assign("c"), poll("c", (0, "a"), hw=1), *final(hw=0)]
    assert [x["value"] for x in check(acked).anomalies["lost"]] == ["a"]


def test_unseen_when_final_read_incomplete() -> None:
    h = [*send("p", "a", offset=0), *final(hw=1, complete=False)]
    result = check(h)
    assert result.counts["unseen"] == 1 and result.counts["lost"] == 0


def test_indefinite_send_never_read_is_fine() -> None:
    h = [*send("p", "a", type_="info"), *final()]
    assert check(h).valid


def test_two_values_at_one_offset() -> None:
    h = [*send("p", "a", offset=0), assign("c"), poll("c", (0, "x"), hw=1), *final((0, "a"))]
    result = check(h)
    kinds = {x["kind"] for x in result.anomalies["inconsistent_offsets"]}
    assert "values-at-offset" in kinds


def test_one_value_at_two_offsets_ack_versus_read() -> None:
    h = [*send("p", "a", offset=3), *final((0, "a"))]
    result = check(h)
    assert [x["kind"] for x in result.anomalies["inconsistent_offsets"]] == ["value-at-offsets"]


def test_duplicate_in_the_log() -> None:
    h = [*send("p", "a", offset=0), *final((0, "a"), (1, "a"))]
    result = check(h)
    assert [x["value"] for x in result.anomalies["duplicated"]] == ["a"]


def test_duplicates_are_classified_by_what_the_producer_was_told() -> None:
    # "a" acknowledged at 0 and written again at 2; "b" timed out (indefinite) and written twice
    h = [*send("p", "a", offset=0), *send("p", "b", type_="info"),
         *final((0, "a"), (1, "b"), (2, "a"), (3, "b"))]
    result = check(h)
    assert result.counts["duplicated"] == 2
    by_value = {x["value"]: x for x in result.anomalies["duplicated"]}
    assert by_value["a"]["class"] == "acknowledged" and by_value["a"]["acknowledged"]
    assert by_value["a"]["acknowledged_offset"] == 0
    assert by_value["b"]["class"] == "unacknowledged" and not by_value["b"]["acknowledged"]
    assert result.as_json()["duplicated_by_ack"] == {
        "acknowledged": 1, "unacknowledged": 1, "failed": 0}
    assert not result.valid  # a duplicate stays an anomaly, whoever wrote it twice


def test_no_duplicates_reports_zero_in_every_class() -> None:
    result = check([*send("p", "a", offset=0), *final((0, "a"))])
    assert result.as_json()["duplicated_by_ack"] == {
        "acknowledged": 0, "unacknowledged": 0, "failed": 0}


def test_aborted_read() -> None:
    h = [*send("p", "a", type_="fail"), *final((0, "a"))]
    assert check(h).counts["aborted_read"] == 1


def test_nonmonotonic_send() -> None:
    h = [*send("p", "a", offset=1), *send("p", "b", offset=0), *final((0, "b"), (1, "a"))]
    result = check(h)
    assert [x["kind"] for x in result.anomalies["nonmonotonic"]] == ["nonmonotonic-send"]


def test_internal_poll_skip_and_nonmonotonic() -> None:
    h = [*send("p", "a", offset=0), *send("p", "b", offset=1), *send("p", "c", offset=2),
         assign("c1"), poll("c1", (0, "a"), (2, "c"), hw=3),
         assign("c2"), poll("c2", (1, "b"), (0, "a"), hw=3),
         *final((0, "a"), (1, "b"), (2, "c"))]
    result = check(h)
    assert [x["kind"] for x in result.anomalies["poll_skip"]] == ["int-poll-skip"]
    assert [x["kind"] for x in result.anomalies["nonmonotonic"]] == ["int-nonmonotonic-poll"]


def test_poll_skip_across_polls_by_assignment_only() -> None:
    base = [*send("p", "a", offset=0), *send("p", "b", offset=1), *send("p", "c", offset=2)]
    tail = final((0, "a"), (1, "b"), (2, "c"))
    assigned = [*base, assign("c"), poll("c", (0, "a"), hw=3), poll("c", (2, "c"), hw=3), *tail]
    assert [x["kind"] for x in check(assigned).anomalies["poll_skip"]] == ["poll-skip"]
    subscribed = [*base, {"process": "c", "type": "ok", "f": "subscribe", "topics": [T]},
                  poll("c", (0, "a"), hw=3), poll("c", (2, "c"), hw=3), *tail]
    assert check(subscribed).valid  # a group member may be moved on by a rebalance
    reassigned = [*base, assign("c"), poll("c", (0, "a"), hw=3), assign("c"),
                  poll("c", (2, "c"), hw=3), *tail]
    assert check(reassigned).valid


def test_nonmonotonic_poll_across_polls() -> None:
    h = [*send("p", "a", offset=0), *send("p", "b", offset=1), assign("c"),
         poll("c", (1, "b"), hw=2), poll("c", (0, "a"), hw=2), *final((0, "a"), (1, "b"))]
    result = check(h)
    assert [x["kind"] for x in result.anomalies["nonmonotonic"]] == ["nonmonotonic-poll"]


def test_a_client_reported_high_watermark_is_not_evidence() -> None:
    """A client's cached HW can come from a newer fetch (a new leader's, one round behind) than
    the one that delivered a record: reading above it is no anomaly by itself."""
    h = [*send("p", "a", offset=0), *send("p", "b", offset=1), assign("c"),
         poll("c", (0, "a"), (1, "b"), hw=1), *final((0, "a"), (1, "b"))]
    assert check(h).valid


def test_replicas_identical_below_the_high_watermark() -> None:
    h = [*send("p", "a", offset=0), *send("p", "b", offset=1), *final((0, "a"), (1, "b"))]
    same = {"t-0": {1: {0: "a", 1: "b", 2: "beyond-hw"}, 2: {0: "a"}}}
    assert check(h, same, {"t-0": [1]}).valid   # broker 2 is behind, out of the ISR
    result = check(h, same, {"t-0": [1, 2]})     # ... but in the ISR it must have everything
    assert [x["broker"] for x in result.anomalies["replicas_diverged"]] == [2]
    other = {"t-0": {1: {0: "a", 1: "b"}, 3: {0: "a", 1: "z"}}}
    result = check(h, other)
    assert [(x["broker"], x["offset"]) for x in result.anomalies["replicas_diverged"]] == [(3, 1)]


def test_acknowledged_without_an_offset_counts_and_is_checked_for_loss() -> None:
    """librdkafka acknowledges a batch whose response was lost, once a later batch of the same
    producer succeeded, with no offset."""
    kept = [*send("p", "a"), *send("p", "b", offset=1), *final((0, "a"), (1, "b"))]
    result = check(kept)
    assert result.valid, bad(result)
    assert result.acknowledged == 2
    lost = [*send("p", "a"), *send("p", "b", offset=1), *final((0, "x"), (1, "b"))]
    assert [x["value"] for x in check(lost).anomalies["lost"]] == ["a"]


def test_longest_gap_between_acknowledgements() -> None:
    from floodmark.chaos.availability import longest_ack_gap

    events = [*send("p1", "a"), *send("p2", "b"), *send("p1", "c"), *send("p1", "d", type_="info")]
    for line, (event, at) in enumerate(zip(events, [0, 1.0, 0, 1.5, 0, 9.0, 0, 30.0],
                                           strict=True), start=1):
        event.update(time=at, line=line)
    assert longest_ack_gap(events) == {"longest_ack_gap_s": 7.5,
                                       "longest_ack_gap": {"start": 1.5, "end": 9.0,
                                                           "lines": [4, 6]}}
    assert longest_ack_gap(events[:2])["longest_ack_gap_s"] is None


def test_the_report_shows_the_longest_gap(tmp_path: Any) -> None:
    from floodmark.chaos.availability import longest_ack_gap
    from floodmark.chaos.report import write_report

    events = [*send("p1", "a"), *send("p1", "b")]
    for line, (event, at) in enumerate(zip(events, [10.0, 10.5, 11.0, 17.25], strict=True),
                                       start=1):
        event.update(time=at, line=line)
    result = {"valid": True, "seed": 1, "faults": [], **longest_ack_gap(events)}
    page = write_report(tmp_path, result, events).read_text()
    assert "longest gap between acknowledgements 6.75 s (from 0.5 s to 7.2 s)" in page
