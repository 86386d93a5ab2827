"""The share-group checks on small hand-written histories: one per anomaly, the re-deliveries
at-least-once allows (not accepted yet, or a failed acknowledgement), and a clean one."""

from __future__ import annotations

from typing import Any

from floodmark.chaos.share_checker import SHARE_ANOMALIES, SHARE_FINAL_PROCESS, check_share

T, G, LIMIT = "t", "sg", 5


class History:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, **event: Any) -> int:
        self.events.append({"line": len(self.events) + 1, **event})
        return len(self.events)

    def sends(self, count: int) -> None:
        for offset in range(count):
            common = {"process": "p", "f": "send", "topic": T, "partition": 0,
                      "value": f"v{offset}"}
            self.add(type="invoke", **common)
            self.add(type="ok", offset=offset, **common)

    def poll(self, process: str, *deliveries: tuple[int, int]) -> int:
        return self.add(process=process, type="ok", f="share-poll", group=G,
                        records=[[T, 0, o, f"v{o}", c] for o, c in deliveries])

    def ack(self, process: str, outcome: str, *offsets: int) -> int:
        records = [[T, 0, o, f"v{o}"] for o in offsets]
        self.add(process=process, type="invoke", f="share-ack", group=G, id=1, records=records)
        return self.add(process=process, type=outcome, f="share-ack", group=G, id=1,
                        records=records)

    def drained(self) -> None:
        self.add(process=SHARE_FINAL_PROCESS, type="ok", f="share-drained", group=G)

    def counts(self) -> dict[str, int]:
        result = check_share(self.events, group=G, limit=LIMIT)
        return {k: v for k, v in result.counts.items() if k in SHARE_ANOMALIES and v}


def test_a_clean_history_with_the_redeliveries_at_least_once_allows() -> None:
    h = History()
    h.sends(3)
    h.poll("a", (0, 1), (1, 1))
    h.ack("a", "info", 0, 1)      # unknown outcome: 0 and 1 may come again
    h.poll("b", (0, 2), (2, 1))
    h.ack("b", "fail", 0)          # refused: 0 comes again
    h.ack("b", "ok", 2)
    h.poll(SHARE_FINAL_PROCESS, (0, 3))
    h.ack(SHARE_FINAL_PROCESS, "ok", 0)
    h.drained()
    assert h.counts() == {}
    group = check_share(h.events, group=G, limit=LIMIT).group
    assert (group["redelivered_records"], group["max_delivery_count"], group["accepted"]) \
        == (1, 3, 2)


def test_an_accepted_record_delivered_again() -> None:
    h = History()
    h.sends(1)
    h.poll("a", (0, 1))
    h.ack("a", "ok", 0)
    h.poll("b", (0, 2))
    h.drained()
    assert h.counts() == {"redelivered_after_accept": 1}


def test_a_written_record_never_delivered() -> None:
    h = History()
    h.sends(2)
    h.poll("a", (0, 1))
    h.ack("a", "ok", 0)
    h.drained()
    assert h.counts() == {"undelivered": 1}


def test_delivery_counts_that_go_back_or_past_the_limit() -> None:
    h = History()
    h.sends(2)
    h.poll("a", (0, 2))
    h.poll("b", (0, 2))            # a failover lost the count: 2 again
    h.poll("a", (1, LIMIT + 1))
    h.drained()
    assert h.counts() == {"delivery_count": 2}


def test_without_the_drainer_going_idle_nothing_is_judged_undelivered() -> None:
    h = History()
    h.sends(1)
    assert h.counts() == {"undrained": 1}


def test_a_value_written_twice_by_a_producers_resend_is_two_records() -> None:
    """A producer's resend under a new epoch can write one value at two offsets: each copy is
    its own record, delivered once with count 1, and accepting one does not accept the
    other."""
    h = History()
    h.sends(1)
    h.add(process="p", type="ok", f="share-poll", group=G,
          records=[[T, 0, 0, "v0", 1], [T, 0, 1, "v0", 1]])
    h.ack("a", "ok", 0)
    h.add(process="p", type="ok", f="share-poll", group=G, records=[[T, 0, 1, "v0", 2]])
    h.drained()
    assert h.counts() == {}


def test_a_refused_accept_whose_record_never_comes_back() -> None:
    h = History()
    h.sends(2)
    h.poll("a", (0, 1), (1, 1))
    h.ack("a", "fail", 0, 1)       # refused: both must come back...
    h.poll("b", (1, 2))            # ...1 does, 0 never does
    h.ack("b", "ok", 1)
    h.drained()
    assert h.counts() == {"refused_not_redelivered": 1}
    h = History()
    h.sends(1)
    h.poll("a", (0, 1))
    h.ack("a", "info", 0)          # unknown (a transport failure): it may have been applied
    h.drained()
    assert h.counts() == {}
