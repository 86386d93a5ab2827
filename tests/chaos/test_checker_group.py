"""The consumer-group checks on small hand-written histories: one per anomaly, the re-deliveries
at-least-once allows, and clean ones."""

from __future__ import annotations

from typing import Any

from floodmark.chaos.group_checker import GROUP_FINAL_PROCESS, check_group
from floodmark.chaos.group_member import generation_of

T = "t"
G = "g"


class History:
    """Builds a history; every event gets the next line number."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.commit_ids = 0

    def add(self, **event: Any) -> int:
        self.events.append({"line": len(self.events) + 1, **event})
        return len(self.events)

    def sends(self, count: int, partition: int = 0) -> None:
        for offset in range(count):
            value = f"v{partition}-{offset}"
            common = {"process": "p", "f": "send", "topic": T, "partition": partition,
                      "value": value}
            self.add(type="invoke", **common)
            self.add(type="ok", offset=offset, **common)

    def assign(self, process: str, generation: int, *partitions: int, member: str = ""
               ) -> int:
        return self.add(process=process, type="ok", f="rebalance", group=G,
                        generation=generation, member=member or f"m-{process}",
                        assigned=[[T, p] for p in partitions or (0,)])

    def assign_kip848(self, process: str, member_epoch: int, *partitions: int) -> int:
        """A KIP-848 member's span: its member epoch, no generation."""
        return self.add(process=process, type="ok", f="rebalance", group=G, generation=None,
                        member_epoch=member_epoch, member=f"m-{process}",
                        assigned=[[T, p] for p in partitions])

    def revoke(self, process: str) -> int:
        return self.add(process=process, type="ok", f="revoke", group=G, partitions=[[T, 0]])

    def poll(self, process: str, *offsets: int, partition: int = 0) -> int:
        return self.add(process=process, type="ok", f="poll", group=G, generation=None,
                        records=[[T, partition, o, f"v{partition}-{o}"] for o in offsets])

    def commit(self, process: str, offset: int, outcome: str = "ok", mode: str = "sync",
               partition: int = 0) -> tuple[int, int]:
        cid = self.commit_ids
        self.commit_ids += 1
        offsets = [[T, partition, offset]]
        invoke = self.add(process=process, type="invoke", f="commit", group=G, id=cid,
                          mode=mode, offsets=offsets, generation=None)
        done: dict[str, Any] = {"process": process, "type": outcome, "f": "commit",
                                "group": G, "id": cid, "mode": mode}
        if outcome == "ok":
            done["offsets"] = offsets
        else:
            done["error"] = "ILLEGAL_GENERATION"
        return invoke, self.add(**done)

    def final(self, count: int, committed: int | None = -1, partitions: int = 1) -> None:
        for p in range(partitions):
            self.add(process="final", type="ok", f="poll",
                     records=[[T, p, o, f"v{p}-{o}"] for o in range(count)])
        self.add(process="final", type="ok", f="final", complete=True,
                 high_watermarks=[[T, p, count, 0] for p in range(partitions)])
        if committed != -1:
            self.add(process=GROUP_FINAL_PROCESS, type="ok", f="committed", group=G,
                     offsets=[[T, p, -1001 if committed is None else committed]
                              for p in range(partitions)])


def bad(result: Any) -> dict[str, int]:
    return {k: v for k, v in result.counts.items() if v}


def test_clean_group_history_with_a_rebalance() -> None:
    h = History()
    h.sends(6)
    h.assign("a", 1)
    h.poll("a", 0, 1)
    h.commit("a", 2)
    h.poll("a", 2)
    h.commit("a", 3, mode="async")
    h.revoke("a")
    h.assign("b", 2)
    h.poll("b", 3, 4)
    h.commit("b", 5)
    h.poll("b", 5)
    h.commit("b", 6)
    h.final(6, committed=6)
    result = check_group(h.events, group=G)
    assert result.valid, bad(result)
    assert result.group["spans"] == 2 and result.group["generations"] == 2
    assert result.group["lag_at_end"] == 0
    assert result.group["commits"] == {"ok": 4, "fail": 0, "info": 0}


def test_redelivery_from_the_last_committed_offset_is_allowed() -> None:
    h = History()
    h.sends(4)
    h.assign("a", 1)
    h.poll("a", 0, 1, 2)
    h.commit("a", 1)                     # only offset 0 committed before a went away
    h.add(process="a", type="info", f="crash")
    h.assign("b", 2)
    h.poll("b", 1, 2, 3)                 # 1 and 2 again: at-least-once
    h.commit("b", 4)
    h.final(4, committed=4)
    result = check_group(h.events)
    assert result.valid, bad(result)
    assert result.group["redelivered_allowed"] == 2


def test_consumer_moved_back_past_what_its_group_committed() -> None:
    h = History()
    h.sends(4)
    h.assign("a", 1)
    h.poll("a", 0, 1, 2)
    _invoke, ok = h.commit("a", 3)
    h.revoke("a")
    assigned = h.assign("b", 2)
    first = h.poll("b", 0, 1, 2, 3)      # from 0, though 3 was committed
    h.commit("b", 4)
    h.final(4, committed=4)
    result = check_group(h.events)
    assert bad(result) == {"rewound": 1, "redelivered": 3}, bad(result)
    rewound = result.anomalies["rewound"][0]
    assert rewound["first_offset"] == 0 and rewound["committed"]["offset"] == 3
    assert {ok, assigned, first} <= set(rewound["lines"])
    assert sorted(x["offset"] for x in result.anomalies["redelivered"]) == [0, 1, 2]


def _reordered_commits(h: History, first: str, second: str) -> None:
    """``first`` asks to commit 1 (async), ``second`` asks to commit 3; 3 comes back ``ok``
    before 1: the order the coordinator stored them in."""
    h.add(process=first, type="invoke", f="commit", group=G, id=100, mode="async",
          offsets=[[T, 0, 1]], generation=None)
    h.add(process=second, type="invoke", f="commit", group=G, id=101, mode="sync",
          offsets=[[T, 0, 3]], generation=None)
    h.add(process=second, type="ok", f="commit", group=G, id=101, mode="sync",
          offsets=[[T, 0, 3]])
    h.add(process=first, type="ok", f="commit", group=G, id=100, mode="async",
          offsets=[[T, 0, 1]])


def test_a_members_own_commits_reordered_by_its_client_move_the_group_back() -> None:
    """librdkafka re-sent a timed-out asynchronous commit behind the member's later one (the
    chaos runs' seed 5 and seed 1 of the classic protocol): the coordinator stored the lower
    one last, as its member asked, so the next owner starting there was not moved back past
    what its group committed; the run says so in ``client_reordered_commits``."""
    h = History()
    h.sends(4)
    h.assign("a", 1)
    h.poll("a", 0, 1, 2)
    _reordered_commits(h, "a", "a")
    h.revoke("a")
    h.assign("b", 2)
    h.poll("b", 1, 2, 3)                 # from 1: the group's committed offset
    h.commit("b", 4)
    h.final(4, committed=4)
    result = check_group(h.events, stored_commits={"t-0": [3, 1, 4]})
    assert result.valid, bad(result)
    assert result.group["client_reordered_commits"] == 1
    example = result.group["client_reordered_examples"][0]
    assert example["later_lower"]["offset"] == 1 and example["earlier_higher"]["offset"] == 3


def test_the_ok_order_alone_does_not_lower_what_the_group_committed() -> None:
    """An asynchronous commit's ``ok`` is seen at a later poll: when the coordinator's log holds
    the two commits in the order they were asked for (or no log is given), the group had
    committed the higher one, and a new owner starting below it was moved back."""
    for stored in ({"t-0": [1, 3, 4]}, None):
        h = History()
        h.sends(4)
        h.assign("a", 1)
        h.poll("a", 0, 1, 2)
        _reordered_commits(h, "a", "a")
        h.revoke("a")
        h.assign("b", 2)
        h.poll("b", 1, 2, 3)
        h.commit("b", 4)
        h.final(4, committed=4)
        result = check_group(h.events, stored_commits=stored)
        assert bad(result) == {"rewound": 1, "redelivered": 2}, (stored, bad(result))
        assert result.group["client_reordered_commits"] == 0


def test_another_members_late_lower_commit_is_still_judged_by_the_highest() -> None:
    """The exception above is only for a member's own commits: a lower commit of another
    member coming back last does not lower what the group is judged to have committed."""
    h = History()
    h.sends(4)
    h.assign("a", 1)
    h.assign("c", 1, 1)
    h.poll("a", 0, 1, 2)
    _reordered_commits(h, "c", "a")
    h.revoke("a")
    h.revoke("c")
    h.assign("b", 2)
    h.poll("b", 1, 2, 3)
    h.commit("b", 4)
    h.final(4, committed=4)
    result = check_group(h.events, stored_commits={"t-0": [3, 1, 4]})
    assert bad(result) == {"rewound": 1, "redelivered": 2}, bad(result)
    assert result.group["client_reordered_commits"] == 0


def test_a_commit_that_came_back_after_the_assignment_does_not_count() -> None:
    """The new owner's committed offsets were fetched when its assignment began: a commit
    that completed later (a race of the old owner's) proves nothing about them."""
    h = History()
    h.sends(3)
    h.assign("a", 1)
    h.poll("a", 0, 1)
    h.assign("b", 2)
    h.commit("a", 2)
    h.poll("b", 0, 1, 2)
    h.commit("b", 3)
    h.final(3, committed=3)
    result = check_group(h.events)
    assert result.valid, bad(result)


def test_lost_committed_record_never_delivered() -> None:
    h = History()
    h.sends(4)
    h.assign("a", 1)
    h.poll("a", 0)
    h.commit("a", 1)
    h.revoke("a")
    h.assign("b", 2)
    h.poll("b", 2, 3)                    # offset 1 never delivered to anyone
    h.commit("b", 4)
    h.final(4, committed=4)
    result = check_group(h.events)
    assert bad(result) == {"lost_committed": 1}, bad(result)
    assert result.anomalies["lost_committed"][0]["value"] == "v0-1"


def test_poll_skip_and_nonmonotonic_poll_within_one_assignment() -> None:
    h = History()
    h.sends(6)
    h.assign("a", 1)
    h.poll("a", 0, 1)
    h.poll("a", 3)                       # skips 2
    h.poll("a", 3, 4, 5)                 # 3 again, same generation
    h.final(6)
    result = check_group(h.events)
    kinds = {(x["kind"], tuple(x["offsets"])) for x in
             result.anomalies["poll_skip"] + result.anomalies["nonmonotonic"]}
    assert kinds == {("group-poll-skip", (1, 3)), ("group-nonmonotonic-poll", (3, 3))}, kinds
    # across a rebalance a member starts afresh (from the committed offset)
    h = History()
    h.sends(3)
    h.assign("a", 1)
    h.poll("a", 0, 1, 2)
    h.assign("a", 2)
    h.poll("a", 0)
    h.final(3)
    assert check_group(h.events).valid


def test_committed_offset_going_backwards() -> None:
    h = History()
    h.sends(6)
    h.assign("a", 1)
    h.poll("a", 0, 1, 2, 3, 4)
    h.commit("a", 5)
    h.commit("a", 2, mode="async")       # asked for after 5 came back ok
    h.commit("a", 1, outcome="fail")     # refused: nothing to judge
    h.poll("a", 5)
    h.final(6, committed=2)
    result = check_group(h.events)
    assert bad(result) == {"commit_backwards": 2}, bad(result)
    kinds = sorted(x["kind"] for x in result.anomalies["commit_backwards"])
    assert kinds == ["commit", "final"]
    assert result.group["lag_at_end"] == 4  # the final log ends at 6, the group at 2


def test_group_that_forgot_its_committed_offsets() -> None:
    h = History()
    h.sends(2)
    h.assign("a", 1)
    h.poll("a", 0, 1)
    h.commit("a", 2)
    h.final(2, committed=None)
    result = check_group(h.events)
    assert bad(result) == {"commit_backwards": 1}, bad(result)
    assert result.anomalies["commit_backwards"][0]["committed"] is None


def test_two_members_owning_one_partition_in_one_generation() -> None:
    h = History()
    h.sends(2)
    h.assign("a", 5, 0)
    h.assign("b", 5, 0, 1)
    h.assign("c", 6, 0)                  # a later generation: fine
    h.final(2)
    result = check_group(h.events)
    assert bad(result) == {"split_ownership": 1}, bad(result)
    assert result.anomalies["split_ownership"][0]["members"] == ["m-a", "m-b"]


def test_other_groups_and_plain_consumers_are_not_judged_here() -> None:
    h = History()
    h.sends(3)
    h.add(process="x", type="ok", f="rebalance", group="other", generation=1, member="m-x",
          assigned=[[T, 0]])
    h.add(process="x", type="ok", f="poll", group="other", records=[[T, 0, 2, "v0-2"]])
    h.final(3)
    assert check_group(h.events, group=G).valid


def test_generation_from_librdkafka_group_metadata() -> None:
    metadata = b"CGMDv2:\x07\x00\x00\x00g\x00rdkafka-1\x00\x01"
    assert generation_of(metadata) == 7
    assert generation_of(b"nonsense") is None and generation_of(None) is None
    assert generation_of(b"CGMDv2:\x01") is None


# -- both protocols in one group (``--group-protocol mixed``) ----------------------------------


def test_a_group_converting_both_ways_with_one_owner_per_epoch_is_valid() -> None:
    """A consumer member at epoch 1, classic members of the consumer group at their member
    epoch 3, the downgrade (a classic generation 4), an upgrade at 6 and a KIP-848 member at 7:
    one owner per (epoch, partition), every record delivered once."""
    h = History()
    h.sends(4)
    h.assign_kip848("c1", 1, 0, 1)
    h.poll("c1", 0)
    h.commit("c1", 1)
    h.revoke("c1")
    h.assign_kip848("c1", 1, 1)          # kept partition 1, still at epoch 1 (revoking)
    h.assign("k1", 3, 0)                 # classic member of the consumer group: epoch 3
    h.poll("k1", 1)
    h.commit("k1", 2)
    h.add(process="c1", type="info", f="leave", group=G)     # the last KIP-848 member leaves
    h.revoke("k1")
    h.assign("k1", 4, 0, 1)              # downgraded, rebalanced: classic generation 4
    h.poll("k1", 2)
    h.commit("k1", 3)
    h.revoke("k1")
    h.assign("k1", 6, 1)                 # upgraded at 6 (member epoch 6)
    h.assign_kip848("c2", 7, 0)          # the member that upgraded it
    h.poll("c2", 3)
    h.commit("c2", 4)
    h.final(4, committed=4)
    result = check_group(h.events, group=G)
    assert result.valid, (bad(result), result.anomalies)
    assert result.group["spans_by_protocol"] == {"classic": 3, "consumer": 3}
    assert result.group["lag_at_end"] == 0


def test_a_classic_and_a_kip848_member_owning_one_partition_in_one_epoch_at_once() -> None:
    h = History()
    h.sends(2)
    h.assign("k1", 5, 0)                 # a classic member of the consumer group, epoch 5
    h.assign_kip848("c1", 5, 0)          # and a KIP-848 member at epoch 5, while k1 holds it
    h.poll("c1", 0)
    h.poll("k1", 1)                      # k1 is alive (an unclosed span ends at its last line)
    h.final(2)
    result = check_group(h.events, group=G)
    assert bad(result) == {"split_ownership": 1}, bad(result)
    example = result.anomalies["split_ownership"][0]
    assert example["at_once"] and example["members"] == ["m-c1", "m-k1"]


def test_epochs_start_over_when_the_group_is_created_again() -> None:
    """A KIP-848 group took part, so an epoch may come back after the group emptied and the
    other protocol created it again: two owners of one (epoch, partition) count only at once.
    A killed member's span (no closing line) ends at its last line."""
    h = History()
    h.sends(3)
    h.assign_kip848("c1", 2, 0)
    h.poll("c1", 0)                      # c1's last line: SIGKILLed here
    h.assign("k1", 2, 0)                 # a new classic group, generation 2 again, later
    h.poll("k1", 0, 1, 2)
    h.final(3)
    result = check_group(h.events, group=G)
    assert result.valid, (bad(result), result.anomalies)


def test_only_classic_members_a_generation_is_never_reused() -> None:
    """Without KIP-848 members two owners of one generation count even one after the other."""
    h = History()
    h.sends(2)
    h.assign("a", 5, 0)
    h.revoke("a")
    h.assign("b", 5, 0)
    h.final(2)
    assert bad(check_group(h.events)) == {"split_ownership": 1}
