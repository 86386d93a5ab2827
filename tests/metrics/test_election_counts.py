"""``kafka_controller_controllerstats_leaderelections_total`` is a counter: it never goes down.

Hypothesis drives ``ControllerLogic`` with the random admin requests, registrations, fencing and
session expiry of the controller-records property test, and now and then replaces the logic by a
new one (what a voter does when it loses and regains leadership), handing it the server's
``ElectionCounts``. After every step the counts have not gone down, and the leader-election
count equals what the emitted records show: partition changes of an existing partition to a
leader at a new leader epoch. Deleting a topic (whose leader epochs the old epoch-sum gauge
counted) leaves the counters as they are.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic, ElectionCounts
from floodmark.controller.metrics import ControllerCollector
from floodmark.errors import KafkaError
from tests.property.test_controller_records_props import _run, ops

EXAMPLES = int(os.environ.get("FLOODMARK_PROPERTY_EXAMPLES", "100"))


class _Server:
    """What ``ControllerCollector`` reads of a ``ControllerServer``."""

    def __init__(self, image: MetadataImage, logic: ControllerLogic | None,
                 elections: ElectionCounts) -> None:
        self.image = image
        self.logic = logic
        self.elections = elections


def _scraped(server: _Server) -> dict[str, float]:
    return {s.name: s.value for m in ControllerCollector(server).collect() for s in m.samples}


def _elections_in(records: list[tuple[int, dict[str, Any]]], shadow: MetadataImage) -> int:
    """Leader elections the records show, applied one by one to ``shadow``."""
    n = 0
    for offset, rec in records:
        if rec["type"] == "partition":
            old = shadow.partition(rec["topic"], rec["partition"])
            if old is not None and rec["leader"] >= 0 and rec["leader_epoch"] > old.leader_epoch:
                n += 1
        shadow.apply_all([(offset, rec)], lambda bad: None)
    return n


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops | st.tuples(st.just("new_logic")), min_size=1, max_size=40))
def test_leader_elections_never_decrease(schedule: list[tuple[Any, ...]]) -> None:
    config = ControllerConfig(broker_session_timeout_ms=1000)
    counts = ElectionCounts()
    logic = ControllerLogic(MetadataImage(), config, elections=counts)
    logic.bootstrap()
    for b in (1, 2, 3):
        logic.register_broker(b, "127.0.0.1", 9000 + b, f"{b}-a", 0)
    logic.create_topic("a", 3, 3, {"min.insync.replicas": "2"})
    logic.create_topic("b", 2, 2, {})
    shadow = MetadataImage()
    expected = _elections_in(logic.take_pending(), shadow)
    before = (counts.leader_elections, counts.unclean_leader_elections)
    now = 0
    for op in schedule:
        now += 10 + (op[1] if op[0] == "tick" else 0)
        if op[0] == "new_logic":  # leadership lost and regained: a new logic, same counts
            logic = ControllerLogic(logic.image, config, elections=counts)
            logic.start(now)
            continue
        with contextlib.suppress(KafkaError):
            _run(logic, op, now)
        expected += _elections_in(logic.take_pending(), shadow)
        after = (counts.leader_elections, counts.unclean_leader_elections)
        assert after[0] >= before[0] and after[1] >= before[1], f"{op}: {before} -> {after}"
        assert counts.leader_elections == expected, op
        before = after
        scraped = _scraped(_Server(logic.image, logic, counts))
        assert scraped["kafka_controller_controllerstats_leaderelections_total"] == after[0]
        assert scraped["kafka_controller_controllerstats_uncleanleaderelections_total"] == after[1]


def test_elections_survive_a_deleted_topic_and_a_lost_leadership() -> None:
    counts = ElectionCounts()
    logic = ControllerLogic(MetadataImage(), ControllerConfig(), elections=counts)
    logic.bootstrap()
    for b in (1, 2):
        logic.register_broker(b, "127.0.0.1", 9000 + b, f"{b}-a", 0)
    logic.create_topic("t", 1, 2, {})
    leader = logic.image.partition("t", 0)
    assert leader is not None and counts.leader_elections == 0  # a first leader: no election
    logic.fence_broker(leader.leader, "test")
    assert counts.leader_elections == 1
    server = _Server(logic.image, logic, counts)
    assert _scraped(server)["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    logic.delete_topic("t")
    server.logic = None  # a voter that is not (or no longer) the active controller
    scraped = _scraped(server)
    assert scraped["kafka_controller_controllerstats_leaderelections_total"] == 1
    assert scraped["kafka_controller_kafkacontroller_activecontrollercount"] == 0
