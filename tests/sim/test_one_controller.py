"""The simulator drives the controller that runs: ``SimController`` is an adapter over
``ControllerLogic``, and the rule the two copies used to disagree on (a restarted broker and the
ISR) is one rule, shown here in the simulator and on the logic the controller process runs."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import pytest

from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic, elr_config
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
from floodmark.replication.modes import Truncation
from floodmark.sim.partition import controller as sim_controller
from floodmark.sim.partition.cluster import Cluster
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.explore import ExploreOptions, build_cluster


def test_the_simulated_controller_is_the_controller_logic() -> None:
    cluster = Cluster(SimConfig())
    assert type(cluster.controller.logic) is ControllerLogic
    assert type(cluster.controller.logic.image) is MetadataImage
    # The adapter decides nothing: it never calls the election builder itself.
    tree = ast.parse(inspect.getsource(sim_controller))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert not imported & {"build_change", "elect_leader", "apply_alter_partition",
                           "validate_alter_partition", "bump_leader_epoch"}


def test_explorer_runs_the_controller_rule_that_runs() -> None:
    modern = build_cluster(1, ExploreOptions(truncation=Truncation.LEADER_EPOCH))
    assert modern.controller.logic.config.new_incarnation_keeps_isr is False
    historical = build_cluster(1, ExploreOptions(truncation=Truncation.HIGH_WATERMARK))
    assert historical.controller.logic.config.new_incarnation_keeps_isr is True


def _settle(cluster: Cluster, until: int) -> None:
    cluster.world.run_until(until)


def test_a_restarted_follower_leaves_the_isr_and_rejoins_by_catching_up_in_the_simulator() -> None:
    cluster = Cluster(SimConfig(truncation=Truncation.LEADER_EPOCH), seed=3)
    cluster.boot()
    cluster.producer.start()
    world = cluster.world
    _settle(cluster, world.now_ms + 500)
    reg = cluster.controller.registration
    follower = next(b for b in cluster.brokers if b.broker_id != reg.leader)
    assert follower.broker_id in reg.isr
    follower.crash(lose_unsynced=False)
    follower.start()  # well within the session: only the new incarnation tells the controller
    deadline = world.now_ms + 50
    while world.now_ms < deadline and follower.broker_epoch < 0:
        world.run_until(world.now_ms + 1)
    assert follower.broker_epoch >= 0, "the restarted broker never registered"
    assert follower.broker_id not in cluster.controller.registration.isr
    # It rejoins through the leader's expansion rule once it has caught up.
    deadline = world.now_ms + 5000
    while world.now_ms < deadline and follower.broker_id not in cluster.controller.registration.isr:
        world.run_until(world.now_ms + 10)
    assert follower.broker_id in cluster.controller.registration.isr
    assert cluster.checker.violations == []


def _logic(**cfg: Any) -> ControllerLogic:
    logic = ControllerLogic(MetadataImage(), ControllerConfig(auto_leader_rebalance_enable=False,
                                                              **cfg))
    logic.bootstrap()
    for b in (1, 2, 3):
        logic.register_broker(b, "127.0.0.1", 9000 + b, f"inc-{b}", now_ms=0)
    logic.create_topic("t", 1, 3, {})
    return logic


def test_a_restarted_follower_leaves_the_isr_in_the_controller_logic() -> None:
    logic = _logic()
    reg = logic.image.partition("t", 0)
    assert reg is not None
    follower = reg.replicas[1]
    logic.register_broker(follower, "127.0.0.1", 1, "again", now_ms=10)
    after = logic.image.partition("t", 0)
    assert after is not None and follower not in after.isr and after.leader == reg.leader
    assert not logic.image.brokers[follower].fenced  # the new incarnation itself is acceptable


def test_historical_rule_keeps_the_isr_and_bumps_a_restarted_leaders_epoch() -> None:
    logic = _logic(new_incarnation_keeps_isr=True)
    reg = logic.image.partition("t", 0)
    assert reg is not None
    logic.register_broker(reg.replicas[1], "127.0.0.1", 1, "again", now_ms=10)
    kept = logic.image.partition("t", 0)
    assert kept is not None and kept.isr == reg.isr and kept.leader_epoch == reg.leader_epoch
    logic.register_broker(reg.leader, "127.0.0.1", 1, "again", now_ms=20)
    bumped = logic.image.partition("t", 0)
    assert bumped is not None and bumped.leader == reg.leader
    assert bumped.leader_epoch == reg.leader_epoch + 1 and bumped.isr == reg.isr


def test_unclean_shutdown_leaves_isr_and_elr_when_asked() -> None:
    logic = _logic(unclean_shutdown_leaves_isr=True, new_incarnation_keeps_isr=True)
    reg = logic.image.partition("t", 0)
    assert reg is not None
    follower = reg.replicas[2]
    logic.register_broker(follower, "127.0.0.1", 1, "again", now_ms=10, clean_shutdown=False)
    after = logic.image.partition("t", 0)
    assert after is not None and follower not in after.isr and follower not in after.elr
    # A clean restart under the same rule keeps it (the historical switch is on here).
    other = reg.replicas[1]
    logic.register_broker(other, "127.0.0.1", 1, "again", now_ms=20, clean_shutdown=True)
    kept = logic.image.partition("t", 0)
    assert kept is not None and other in kept.isr


def _power_cut_of_the_last_isr_member(logic: ControllerLogic) -> tuple[int, PartitionRegistration]:
    """The leader drops both followers from the ISR (below min ISR 2), they are fenced
    (paused), the leader loses its power and registers again after an unclean shutdown, then
    the followers heartbeat again. Returns the power-cut broker and the registration."""
    reg = logic.image.partition("t", 0)
    assert reg is not None
    leader, epochs = reg.leader, logic.image.broker_epochs()
    error, _ = logic.alter_partition("t", 0, AlterPartitionRequest(
        leader, epochs[leader], reg.leader_epoch, reg.partition_epoch, (leader,),
        (epochs[leader],)))
    assert error is ErrorCode.NONE
    others = [b for b in reg.replicas if b != leader]
    for b in others:
        logic.fence_broker(b, "paused")
    logic.register_broker(leader, "127.0.0.1", 1, "after-power-cut", now_ms=10,
                          clean_shutdown=False)
    for b in others:
        logic.heartbeat(b, epochs[b], now_ms=20)
    after = logic.image.partition("t", 0)
    assert after is not None
    return leader, after


def test_a_power_cut_of_the_last_isr_member_elects_an_eligible_leader_replica() -> None:
    """Issue 13's finding 5 on the logic the controller process runs (``elr_config`` is what
    ``eligible.leader.replicas.version=1`` turns on). With KIP-966 the power-cut broker leaves
    the ISR and the ELR and a follower the leader dropped below min ISR leads: it holds every
    committed record. Without, the power-cut broker is elected again from what it kept."""
    cut, after = _power_cut_of_the_last_isr_member(_logic(**elr_config(True, 2)))
    assert after.leader != cut and after.isr == (after.leader,) and cut not in after.elr
    assert logic_unclean_elections_after(elr_config(True, 2)) == 0
    cut, after = _power_cut_of_the_last_isr_member(_logic())
    assert after.leader == cut and after.isr == (cut,)


def logic_unclean_elections_after(cfg: dict[str, Any]) -> int:
    logic = _logic(**cfg)
    _power_cut_of_the_last_isr_member(logic)
    return logic.unclean_elections


def test_a_lower_min_isr_clears_the_eligible_leader_replicas() -> None:
    """At min ISR the leader's HW moves without the ELR members, so they are no longer
    eligible: a topic's (or the cluster's) new min.insync.replicas recomputes the ELR at once.
    A broker-level value, which one leader alone would count by, is refused under ELR."""
    logic = _logic(**elr_config(True, 2))
    _power_cut_of_the_last_isr_member(logic)
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.elr  # the new leader alone, the other follower eligible
    logic.alter_topic_configs("t", {"min.insync.replicas": "1"})
    after = logic.image.partition("t", 0)
    assert after is not None and after.elr == () and after.isr == reg.isr
    with pytest.raises(KafkaError) as refused:
        logic.alter_broker_configs("1", {"min.insync.replicas": 1})
    assert refused.value.code is ErrorCode.INVALID_CONFIG
    cluster_wide = _logic(**elr_config(True, 2))
    _power_cut_of_the_last_isr_member(cluster_wide)
    cluster_wide.alter_broker_configs("", {"min.insync.replicas": 1})
    cleared = cluster_wide.image.partition("t", 0)
    assert cleared is not None and cleared.elr == ()
