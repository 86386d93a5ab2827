"""The controller's decisions (sans-I/O) and the metadata log's durability."""

from __future__ import annotations

from pathlib import Path

import pytest

from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.metadata_log import MetadataLog
from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication.election import AlterPartitionRequest, LeaderRecoveryState

SESSION_MS = 1000


def _cluster(brokers: int = 3, **cfg: object) -> ControllerLogic:
    logic = ControllerLogic(MetadataImage(), ControllerConfig(broker_session_timeout_ms=SESSION_MS,
                                                              **cfg))  # type: ignore[arg-type]
    logic.bootstrap()
    for b in range(1, brokers + 1):
        logic.register_broker(b, "127.0.0.1", 9000 + b, f"inc-{b}", now_ms=0)
    return logic


def _heartbeat_all(logic: ControllerLogic, now_ms: int, skip: tuple[int, ...] = ()) -> None:
    for b, reg in logic.image.brokers.items():
        if b not in skip:
            logic.heartbeat(b, reg.broker_epoch, now_ms)


def test_broker_epochs_are_metadata_offsets_and_retries_keep_them() -> None:
    logic = _cluster()
    epochs = [logic.image.brokers[b].broker_epoch for b in (1, 2, 3)]
    assert epochs == sorted(epochs) and len(set(epochs)) == 3
    assert logic.register_broker(2, "127.0.0.1", 9002, "inc-2", now_ms=5) == epochs[1]
    new = logic.register_broker(2, "127.0.0.1", 9002, "inc-2b", now_ms=5)
    assert new > epochs[2]


def test_session_expiry_fences_and_elects_from_isr() -> None:
    logic = _cluster()
    logic.create_topic("t", 1, 3, {})
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.isr == reg.replicas and reg.leader_epoch == 0
    leader = reg.leader
    for now in range(100, 1600, 100):  # the controller ticks every 100 ms
        _heartbeat_all(logic, now, skip=(leader,))
        logic.tick(now)
        if now <= 1000:
            assert not logic.image.brokers[leader].fenced  # within the session
    assert logic.image.brokers[leader].fenced
    new = logic.image.partition("t", 0)
    assert new is not None
    assert new.leader != leader and new.leader in reg.isr
    assert leader not in new.isr
    assert new.leader_epoch == 1 and new.partition_epoch == 1
    # The fenced broker heartbeats again with its epoch: unfenced, not back in the ISR by itself.
    logic.heartbeat(leader, logic.image.brokers[leader].broker_epoch, 1600)
    assert not logic.image.brokers[leader].fenced
    assert leader not in logic.image.partition("t", 0).isr  # type: ignore[union-attr]


def test_last_isr_member_kept_and_unclean_only_when_enabled() -> None:
    for unclean in (False, True):
        logic = _cluster()
        logic.create_topic("t", 1, 3, {"unclean.leader.election.enable": str(unclean).lower()})
        reg = logic.image.partition("t", 0)
        assert reg is not None
        a, b, c = reg.replicas
        now = 0
        for dead in (b, c, a):  # followers first, then the leader
            for _ in range(20):  # 2 sessions of 100 ms ticks
                now += 100
                for x in (a, b, c):
                    reg = logic.image.brokers[x]
                    if x != dead and not reg.fenced:
                        logic.heartbeat(x, reg.broker_epoch, now)
                logic.tick(now)
        reg = logic.image.partition("t", 0)
        assert reg is not None and reg.leader == -1 and reg.isr == (a,)
        # The stale follower b comes back (new incarnation).
        logic.register_broker(b, "127.0.0.1", 1, "b-again", now_ms=now)
        reg = logic.image.partition("t", 0)
        assert reg is not None
        if unclean:
            assert reg.leader == b and reg.isr == (b,)
            assert reg.leader_recovery_state is LeaderRecoveryState.RECOVERING
            assert logic.unclean_elections == 1
        else:
            assert reg.leader == -1 and reg.isr == (a,)


def test_alter_partition_compare_and_set() -> None:
    logic = _cluster()
    logic.create_topic("t", 1, 3, {})
    reg = logic.image.partition("t", 0)
    assert reg is not None
    leader, f1, f2 = reg.replicas
    epochs = {b: r.broker_epoch for b, r in logic.image.brokers.items()}

    def req(isr: tuple[int, ...], partition_epoch: int, leader_epoch: int = 0) -> AlterPartitionRequest:
        return AlterPartitionRequest(leader, epochs[leader], leader_epoch, partition_epoch, isr,
                                     tuple(epochs[b] for b in isr))

    err, new = logic.alter_partition("t", 0, req((leader, f1), 0))
    assert err is ErrorCode.NONE and new is not None and new.partition_epoch == 1
    assert new.leader_epoch == 0  # ISR changes do not bump the leader epoch
    err, _ = logic.alter_partition("t", 0, req((leader,), 0))
    assert err is ErrorCode.INVALID_UPDATE_VERSION  # stale partition epoch
    err, _ = logic.alter_partition("t", 0, req((leader,), 5))
    assert err is ErrorCode.NOT_CONTROLLER
    # Fence f2; proposing it back is INELIGIBLE_REPLICA.
    for b in (leader, f1):
        logic.heartbeat(b, epochs[b], 2 * SESSION_MS)
    logic.tick(2 * SESSION_MS)
    assert logic.image.brokers[f2].fenced
    err, _ = logic.alter_partition("t", 0, req((leader, f1, f2), 1))
    assert err is ErrorCode.INELIGIBLE_REPLICA
    # A stale broker epoch for a member is INELIGIBLE_REPLICA too (KIP-903).
    logic.heartbeat(f2, epochs[f2], 2 * SESSION_MS + 1)
    bad = AlterPartitionRequest(leader, epochs[leader], 0, 1, (leader, f1, f2),
                                (epochs[leader], epochs[f1], epochs[f2] - 1))
    assert logic.alter_partition("t", 0, bad)[0] is ErrorCode.INELIGIBLE_REPLICA


def test_controlled_shutdown_moves_leadership_and_preferred_election_brings_it_back() -> None:
    logic = _cluster(auto_leader_rebalance_enable=False)
    logic.create_topic("t", 1, 3, {})
    reg = logic.image.partition("t", 0)
    assert reg is not None
    preferred = reg.leader
    epoch = logic.image.brokers[preferred].broker_epoch
    answer = logic.heartbeat(preferred, epoch, 10, want_shutdown=True)
    assert answer.shutdown_ready
    moved = logic.image.partition("t", 0)
    assert moved is not None and moved.leader != preferred and preferred not in moved.isr
    assert moved.leader_epoch == 1
    # Restart: new incarnation, then it rejoins the ISR (as the leader's AlterPartition would).
    new_epoch = logic.register_broker(preferred, "127.0.0.1", 1, "again", now_ms=20)
    cur = logic.image.partition("t", 0)
    assert cur is not None
    leader_epoch_b = logic.image.brokers[cur.leader].broker_epoch
    isr = tuple(r for r in cur.replicas if r in (*cur.isr, preferred))
    err, _ = logic.alter_partition("t", 0, AlterPartitionRequest(
        cur.leader, leader_epoch_b, cur.leader_epoch, cur.partition_epoch, isr,
        tuple(new_epoch if r == preferred else -1 for r in isr)))
    assert err is ErrorCode.NONE
    assert logic.rebalance_preferred_leaders() == 1
    back = logic.image.partition("t", 0)
    assert back is not None and back.leader == preferred and back.leader_epoch == 2


def test_topic_validation() -> None:
    logic = _cluster(brokers=2)
    with pytest.raises(KafkaError) as e:
        logic.create_topic("t", 1, 3, {})
    assert e.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    logic.create_topic("t", 2, 2, {})
    with pytest.raises(KafkaError):
        logic.create_topic("t", 1, 1, {})
    logic.create_partitions("t", 4)
    assert len(logic.image.topics["t"].partitions) == 4
    leaders = {r.leader for r in logic.image.topics["t"].partitions.values()}
    assert leaders == {1, 2}  # leaders spread over the brokers
    logic.delete_topic("t")
    assert "t" not in logic.image.topics


def test_metadata_log_survives_restart(tmp_path: Path) -> None:
    mlog = MetadataLog(str(tmp_path))
    logic = _cluster()
    logic.create_topic("t", 3, 3, {"min.insync.replicas": "2"})
    first, _ = logic.allocate_producer_ids()
    mlog.append(logic.take_pending())
    mlog.close()
    reopened = MetadataLog(str(tmp_path))
    image = MetadataImage()
    image.apply_all(reopened.read_all())
    assert image.next_offset == logic.image.next_offset
    assert image.cluster_id == logic.image.cluster_id
    assert image.broker_epochs() == logic.image.broker_epochs()
    assert image.topics["t"].partitions == logic.image.topics["t"].partitions
    assert image.topics["t"].configs == {"min.insync.replicas": "2"}
    # Producer ids are never handed out twice across restarts.
    again = ControllerLogic(image, ControllerConfig())
    assert again.allocate_producer_ids()[0] > first


def test_a_paused_controller_does_not_fence_everyone() -> None:
    logic = _cluster()
    logic.create_topic("t", 1, 3, {})
    logic.tick(100)
    logic.tick(100 + 5 * SESSION_MS)  # the controller was stopped; nobody could heartbeat
    assert not any(b.fenced for b in logic.image.brokers.values())
    for now in range(200 + 5 * SESSION_MS, 300 + 6 * SESSION_MS, 100):
        logic.tick(now)  # but silence after that still counts
    assert all(b.fenced for b in logic.image.brokers.values())


def test_image_replay_skips_seen_offsets_and_refuses_gaps() -> None:
    logic = _cluster()
    records = logic.take_pending()
    image = MetadataImage()
    assert image.apply_all(records[:2]) == [r for _, r in records[:2]]
    assert image.apply_all(records) == [r for _, r in records[2:]]  # first two skipped
    assert image.broker_epochs() == logic.image.broker_epochs()
    with pytest.raises(ValueError):
        image.apply_all([(image.next_offset + 5, {"type": "cluster_id", "cluster_id": "x"})])


def test_records_about_an_older_incarnation_are_ignored() -> None:
    image = MetadataImage()
    image.apply({"type": "register_broker", "broker_id": 1, "broker_epoch": 7, "host": "h",
                 "port": 1, "incarnation": "b"})
    image.apply({"type": "fence_broker", "broker_id": 1, "broker_epoch": 3})
    assert not image.brokers[1].fenced
    image.apply({"type": "fence_broker", "broker_id": 1, "broker_epoch": 7})
    assert image.brokers[1].fenced and 1 in image.ineligible()


def test_dynamic_broker_configs_are_records_and_the_default_drives_unclean_election() -> None:
    """KIP-226 in the controller: each resource's whole set is one record (replayed by any
    image); an empty set removes it; the cluster-wide default's unclean.leader.election.enable
    is the controller's from then on, and setting it elects a leaderless partition at once."""
    logic = _cluster()
    logic.create_topic("t", 1, 3, {})
    reg = logic.image.partition("t", 0)
    assert reg is not None
    a, b, c = reg.replicas
    now = 0
    for dead in (b, c, a):  # the last ISR member a goes last: the partition waits for it
        for _ in range(20):
            now += 100
            for x in (a, b, c):
                r = logic.image.brokers[x]
                if x != dead and not r.fenced:
                    logic.heartbeat(x, r.broker_epoch, now)
            logic.tick(now)
    logic.register_broker(b, "127.0.0.1", 1, "b-again", now_ms=now)
    assert logic.image.partition("t", 0).leader == -1  # type: ignore[union-attr]
    logic.alter_broker_configs("2", {"log.retention.ms": 5})
    logic.alter_broker_configs("", {"unclean.leader.election.enable": True})
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.leader == b and logic.unclean_elections == 1
    replay = MetadataImage()
    replay.apply_all(logic.take_pending())
    assert replay.broker_configs == {"2": {"log.retention.ms": 5},
                                     "": {"unclean.leader.election.enable": True}}
    logic.alter_broker_configs("2", {})
    assert "2" not in logic.image.broker_configs
    with pytest.raises(KafkaError, match="broker id"):
        logic.alter_broker_configs("two", {})


def test_the_setting_registry_refuses_read_only_and_ill_typed_broker_configs() -> None:
    from floodmark.broker.config import SETTINGS, validate_dynamic

    assert validate_dynamic({"log.retention.ms": "60000", "min.insync.replicas": "2",
                             "unclean.leader.election.enable": "TRUE"}, "") == {
        "log.retention.ms": 60000, "min.insync.replicas": 2,
        "unclean.leader.election.enable": True}
    with pytest.raises(ValueError, match=r"Cannot update these configs dynamically: "
                                         r"Set\(auto.create.topics.enable, node.id\)"):
        validate_dynamic({"node.id": "4", "auto.create.topics.enable": "false",
                          "log.retention.ms": "1"}, "1")
    with pytest.raises(ValueError, match="Not a number of type INT"):
        validate_dynamic({"min.insync.replicas": "2147483648"}, "")
    with pytest.raises(ValueError, match="at least 1"):
        validate_dynamic({"min.insync.replicas": "0"}, "")
    with pytest.raises(ValueError, match="Unknown broker config"):
        validate_dynamic({"log.retention.fortnights": "1"}, "")
    assert not SETTINGS["replica.lag.time.max.ms"].dynamic and SETTINGS["log.segment.bytes"].dynamic


def _alter_isr(logic: ControllerLogic, topic: str, isr: tuple[int, ...]) -> ErrorCode:
    reg = logic.image.partition(topic, 0)
    assert reg is not None
    epochs = logic.image.broker_epochs()
    return logic.alter_partition(topic, 0, AlterPartitionRequest(
        broker_id=reg.leader, broker_epoch=epochs[reg.leader], leader_epoch=reg.leader_epoch,
        partition_epoch=reg.partition_epoch, new_isr=isr,
        new_isr_broker_epochs=tuple(epochs[r] for r in isr)))[0]


def test_reassignment_adds_then_removes_and_moves_leadership() -> None:
    """KIP-455 as the controller decides it: replicas = target + removing while it runs, the
    added replica joins the ISR through AlterPartition, then the replicas become the target and
    the removed leader hands over at a new leader epoch; cancellation reverts."""
    logic = _cluster(4)
    logic.create_topic("t", 1, 3, {}, assignments=[(1, 2, 3)])
    assert logic.alter_partition_reassignment("t", 0, None)[0] is \
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert logic.alter_partition_reassignment("t", 0, (2, 2))[0] is \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert logic.alter_partition_reassignment("t", 0, (2, 9, 4))[0] is \
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    offset = logic.image.next_offset
    assert logic.alter_partition_reassignment("t", 0, (1, 2, 3)) == (ErrorCode.NONE, "")
    assert logic.image.next_offset == offset  # already there: no record
    assert logic.alter_partition_reassignment("t", 0, (2, 3, 4)) == (ErrorCode.NONE, "")
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.replicas == (2, 3, 4, 1) and reg.isr == (2, 3, 1)
    assert reg.leader == 1 and reg.leader_epoch == 0
    move = logic.image.reassignments[("t", 0)]
    assert (move.target, move.adding, move.removing) == ((2, 3, 4), (4,), (1,))
    assert logic.rebalance_preferred_leaders() == 0  # 2 is first now, but the move runs
    # 4 caught up: the leader (still 1) proposes the bigger ISR; the move completes.
    assert _alter_isr(logic, "t", (1, 2, 3, 4)) is ErrorCode.NONE
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.replicas == (2, 3, 4) and reg.isr == (2, 3, 4)
    assert reg.leader == 2 and reg.leader_epoch == 1
    assert ("t", 0) not in logic.image.reassignments
    # A second move, cancelled before the new replica caught up: back to (2, 3, 4).
    assert logic.alter_partition_reassignment("t", 0, (1, 3, 4))[0] is ErrorCode.NONE
    assert logic.image.partition("t", 0).replicas == (1, 3, 4, 2)  # type: ignore[union-attr]
    assert logic.alter_partition_reassignment("t", 0, None)[0] is ErrorCode.NONE
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.replicas == (2, 3, 4) and reg.isr == (2, 3, 4)
    assert reg.leader == 2 and reg.leader_epoch == 1 and not logic.image.reassignments
    replay = MetadataImage()
    replay.apply_all(logic.take_pending())
    assert replay.partition("t", 0) == reg and not replay.reassignments


def test_reassignment_that_only_removes_completes_at_once() -> None:
    """Every target replica already in the ISR (RF 3 -> 2, the leader removed): the move
    completes in the same decision, leadership moving at a new leader epoch."""
    logic = _cluster(3)
    logic.create_topic("t", 1, 3, {}, assignments=[(1, 2, 3)])
    assert logic.alter_partition_reassignment("t", 0, (3, 2)) == (ErrorCode.NONE, "")
    reg = logic.image.partition("t", 0)
    assert reg is not None and reg.replicas == (3, 2) and reg.isr == (3, 2)
    assert reg.leader == 3 and reg.leader_epoch == 1 and not logic.image.reassignments
