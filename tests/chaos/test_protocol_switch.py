"""``--group-protocol mixed``'s plan (``chaos.protocol_switch``, pure), the conversions read
back from the coordinators' logs (``chaos.nodes.read_conversions``) and the members' stalls read
from their logs (``chaos.run.member_stalls``)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from floodmark.chaos.nodes import read_conversions
from floodmark.chaos.protocol_switch import (
    CLASSIC,
    CONSUMER,
    SWITCH_EVERY_S,
    every_s,
    initial,
    other,
    retire,
    switch_plan,
)
from floodmark.chaos.run import member_stalls


def test_members_start_mixed_and_come_back_with_the_other_protocol() -> None:
    assert initial(3) == [CLASSIC, CONSUMER, CLASSIC]
    assert initial(1) == [CLASSIC]
    assert other(CLASSIC) == CONSUMER and other(CONSUMER) == CLASSIC
    with pytest.raises(ValueError):
        other("eager")


def _walk(members: int, switches: int) -> list[int]:
    """The count of consumer-protocol members after each switch."""
    running, downwards, counts = initial(members), True, []
    for _ in range(switches):
        protocol, downwards = retire(running, downwards)
        running.remove(protocol)
        running.append(other(protocol))
        counts.append(running.count(CONSUMER))
    return counts


def test_the_walk_goes_down_to_a_downgrade_and_up_to_an_upgrade() -> None:
    """1 of 3 speaks the consumer protocol: none (the group downgrades), then one (it
    upgrades), up to all three and back down."""
    assert _walk(3, 8) == [0, 1, 2, 3, 2, 1, 0, 1]
    assert _walk(2, 5) == [0, 1, 2, 1, 0]
    assert _walk(1, 3) == [1, 0, 1]  # a lone classic member: the group flips every time
    with pytest.raises(ValueError):
        retire([], True)


def test_a_killed_member_counts_until_it_is_fenced() -> None:
    """The last KIP-848 member SIGKILLed: while the group still holds it, the walk still goes
    down and asks for a consumer-protocol member (the switch then waits); once it is fenced
    (the downgrade), the walk turns and brings the protocol back (the upgrade)."""
    assert retire([CLASSIC, CLASSIC, CONSUMER], True) == (CONSUMER, True)
    assert retire([CLASSIC, CLASSIC, CLASSIC], True) == (CLASSIC, False)


def test_the_switch_plan_is_seeded_and_spread_over_the_run() -> None:
    plan = switch_plan(1, 90)
    assert plan == switch_plan(1, 90) and plan != switch_plan(2, 90)
    times = [s.at_s for s in plan]
    assert 5 <= len(times) <= 11 and times == sorted(times) and times[-1] < 90
    low, high = SWITCH_EVERY_S
    assert every_s(15) == low and every_s(600) == high and every_s(80) == 10
    assert all(b - a >= low * 0.7 for a, b in itertools.pairwise(times))
    assert len(switch_plan(3, 15)) >= 2
    kills = [s.kill for seed in range(20) for s in switch_plan(seed, 90)]
    assert 0 < sum(kills) < len(kills) / 2  # SIGKILL now and then, mostly a clean leave


def test_conversions_read_from_the_coordinators_logs(tmp_path: Path) -> None:
    (tmp_path / "broker-1.log").write_text(
        "2026-11-28 21:41:18,724 INFO floodmark.broker.handlers.group_apis: group chaos-group: "
        "downgraded from a consumer group to a classic group (KIP-848) at generation 3 with 2 "
        "members\n"
        "2026-11-28 21:41:18,725 INFO floodmark.broker.classic_group.core: group chaos-group "
        "preparing rebalance generation=3: downgraded from a consumer group\n"
        "2026-11-28 21:41:19,000 INFO x: group other: upgraded from a classic group to a "
        "consumer group (KIP-848), generation 9\n")
    (tmp_path / "broker-2.log").write_text(
        "2026-11-28 21:41:17,445 INFO floodmark.broker.handlers.group_apis: group chaos-group: "
        "upgraded from a classic group to a consumer group (KIP-848), generation 2\n")
    found = read_conversions([tmp_path / "broker-1.log", tmp_path / "broker-2.log",
                              tmp_path / "absent.log"], "chaos-group")
    assert found == {"upgrade": 1, "downgrade": 1, "events": [
        ["2026-11-28 21:41:17,445", "upgrade", 2], ["2026-11-28 21:41:18,724", "downgrade", 3]]}


def test_a_stalled_member_is_reported_with_where_it_stood(tmp_path: Path) -> None:
    """The member's watchdog is ``faulthandler``'s: its real output, parsed by the run."""
    script = ("import faulthandler, sys, time\n"
              "faulthandler.dump_traceback_later(0.2, repeat=True, file=sys.stderr)\n"
              "time.sleep(0.7)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    (tmp_path / "gm4.log").write_text("librdkafka says things\n" + done.stderr)
    (tmp_path / "gm5.log").write_text("nothing stalled\n")
    (tmp_path / "cp1.log").write_text(done.stderr)  # not a member
    stalls = member_stalls(tmp_path)
    assert [s["process"] for s in stalls] == ["gm4"] and stalls[0]["dumps"] >= 2
    assert stalls[0]["innermost"] == ['File "<string>", line 3 in <module>']
