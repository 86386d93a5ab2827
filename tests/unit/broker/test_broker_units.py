"""Broker pure pieces: producer state, group coordinator, config, local controller."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from floodmark.broker.config import BrokerConfig
from floodmark.broker.groups import GroupCoordinator, GroupState
from floodmark.broker.metadata import LocalController
from floodmark.broker.partition_state import PartitionState
from floodmark.errors import ErrorCode, KafkaError
from floodmark.groups.offsets import (
    CommittedOffset,
    OffsetStore,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from floodmark.records import Record, build_batch
from floodmark.replication.producer_state import BatchMeta, ProducerStateTable, batch_metas


def meta(pid: int, epoch: int, seq: int, n: int = 3) -> BatchMeta:
    return BatchMeta(pid, epoch, seq, n, n - 1, False)


def test_producer_state_sequences_duplicates_and_epochs() -> None:
    t = ProducerStateTable()
    assert t.check(meta(7, 0, 5)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # unknown, seq≠0
    assert t.check(meta(7, 0, 0)).error == ErrorCode.NONE
    t.record(meta(7, 0, 0), 100)
    assert t.check(meta(7, 0, 3)).error == ErrorCode.NONE
    t.record(meta(7, 0, 3), 103)
    dup = t.check(meta(7, 0, 0))
    assert dup.error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and dup.duplicate_of.first_offset == 100
    assert t.check(meta(7, 0, 7)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check(meta(7, 1, 4)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # new epoch ≠ 0
    assert t.check(meta(7, 1, 0)).error == ErrorCode.NONE
    t.record(meta(7, 1, 0), 106)
    assert t.check(meta(7, 0, 3)).error == ErrorCode.INVALID_PRODUCER_EPOCH
    for i in range(1, 7):  # only the last five batches are remembered
        t.record(meta(7, 1, 3 * i), 106 + 3 * i)
    assert t.check(meta(7, 1, 0)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check(meta(7, 1, 6)).error == ErrorCode.DUPLICATE_SEQUENCE_NUMBER


def test_sequence_wraps_at_int32() -> None:
    t = ProducerStateTable()
    t.record(BatchMeta(1, 0, 2**31 - 2, 2, 1, False), 0)
    assert t.check(BatchMeta(1, 0, 0, 1, 0, False)).error == ErrorCode.NONE


def test_batch_metas_reads_headers() -> None:
    data = build_batch([Record(0, 1, None, b"a"), Record(1, 1, None, b"b")], producer_id=9,
                       producer_epoch=2, base_sequence=40)
    assert batch_metas(data[:-1]) is None and batch_metas(b"") is None
    (m,) = batch_metas(data)
    assert (m.producer_id, m.producer_epoch, m.base_sequence, m.record_count, m.last_sequence) == (
        9, 2, 40, 2, 41)


def test_partition_state_drives_the_core(tmp_path: Path) -> None:
    from floodmark.records import simple_batch
    from floodmark.replication.election import AlterPartitionRequest, PartitionRegistration
    from floodmark.storage.log import Log

    class Hooks:
        def __init__(self) -> None:
            self.woken: list[tuple[str, int]] = []
            self.replica_woken: list[tuple[str, int]] = []
            self.done: list[tuple[int, ErrorCode, int]] = []

        def wake_fetches(self, key: tuple[str, int]) -> None:
            self.woken.append(key)

        def wake_replica_fetches(self, key: tuple[str, int]) -> None:
            self.replica_woken.append(key)

        def complete_produce(self, produce_id: int, error: ErrorCode, base_offset: int) -> None:
            self.done.append((produce_id, error, base_offset))

        def propose_isr(self, key: tuple[str, int], request: AlterPartitionRequest) -> None:
            raise AssertionError("RF=1 never proposes")

    hooks = Hooks()
    plog = Log.open(str(tmp_path / "t-0"), now_ms=0)
    ps = PartitionState("t", 0, node_id=1, log=plog, hooks=hooks, checkpointed_high_watermark=99)
    ps.apply_metadata(PartitionRegistration((1,), (1,), 1, 3, 0), 0)
    # Becoming leader recorded (epoch, LEO) in the epoch cache first (KAFKA-7415).
    assert plog.epoch_cache.latest_epoch == 3 and ps.leader_epoch == 3
    assert ps.high_watermark == 0  # a checkpointed HW beyond the LEO is clamped
    assert ps.check_leader_epoch(-1) == ErrorCode.NONE
    assert ps.check_leader_epoch(2) == ErrorCode.FENCED_LEADER_EPOCH
    assert ps.check_leader_epoch(4) == ErrorCode.UNKNOWN_LEADER_EPOCH
    info = plog.append_as_leader(simple_batch([b"a", b"b"]), ps.leader_epoch, 1)
    ps.apply(ps.core.on_leader_append(ps.log, 7, -1, info.first_offset, info.last_offset, 1,
                                      1000))
    assert hooks.woken == [("t", 0)] and ps.high_watermark == 2
    assert hooks.replica_woken == [("t", 0)]  # the followers' parked fetches ask again
    assert hooks.done == [(7, ErrorCode.NONE, 0)]
    err, answer = ps.end_offset_for_epoch(3, 3)
    assert err == ErrorCode.NONE and (answer.epoch, answer.end_offset) == (3, 2)
    plog.close()


def test_offsets_record_layout_round_trip() -> None:
    c = CommittedOffset(42, 3, "meta", 1234)
    assert decode_key(encode_key("g", "t", 5)) == ("g", "t", 5)
    assert decode_value(encode_value(c)) == c
    store = OffsetStore()
    batch = store.build_commit_batch("g", [("t", 0, c), ("t", 1, CommittedOffset(7, -1, None, 1))], 99)
    replayed = OffsetStore()
    assert replayed.replay(lambda: [batch]) == 2
    assert replayed.fetch("g", "t", 0) == c and replayed.fetch("g", "t", 1).offset == 7


def test_config_layers(tmp_path: Path) -> None:
    toml = tmp_path / "b.toml"
    toml.write_text('"num.partitions" = 4\n[log]\n"segment.bytes" = 1048576\n')
    cfg = BrokerConfig.load(data_dir=tmp_path, listen="0.0.0.0:1234", config_file=toml,
                            overrides=["num.partitions=6", "auto.create.topics.enable=false"],
                            node_id=3)
    assert cfg.get("num.partitions") == 6 and cfg.get("log.segment.bytes") == 1048576
    assert cfg.get("auto.create.topics.enable") is False and cfg.node_id == 3
    assert (cfg.listen_host, cfg.listen_port) == ("0.0.0.0", 1234)
    with pytest.raises(ValueError):
        BrokerConfig.load(data_dir=tmp_path, overrides=["nonsense"])
    with pytest.raises(ValueError, match="unsafe"):
        BrokerConfig.load(data_dir=tmp_path, overrides=["floodmark.truncation=high-watermark"])
    unsafe = BrokerConfig.load(data_dir=tmp_path, overrides=[
        "floodmark.truncation=epoch-offset", "floodmark.truncation.allow.unsafe=true"])
    assert unsafe.truncation.value == "epoch-offset"


def test_local_controller_persists_and_never_reuses_producer_ids(tmp_path: Path) -> None:
    c = LocalController(tmp_path, node_id=1)
    t = asyncio.run(c.create_topic("orders", 3, 1, {"retention.ms": "1000"}))
    pid = asyncio.run(c.allocate_producer_id())
    with pytest.raises(KafkaError) as exc:
        asyncio.run(c.create_topic("orders", 1, 1, {}))
    assert exc.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as exc:
        asyncio.run(c.create_topic("bad/name", 1, 1, {}))
    assert exc.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    with pytest.raises(KafkaError) as exc:
        asyncio.run(c.create_topic("rf3", 1, 3, {}))
    assert exc.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    again = LocalController(tmp_path, node_id=1)
    assert again.topics()["orders"].topic_id == t.topic_id
    assert again.topics()["orders"].configs == {"retention.ms": "1000"}
    assert again.cluster_id == c.cluster_id
    assert asyncio.run(again.allocate_producer_id()) > pid
    asyncio.run(again.create_partitions("orders", 5))
    assert len(LocalController(tmp_path, 1).topics()["orders"].partitions) == 5


def test_local_controller_is_the_controller_logic_and_restarts_move_leader_epochs(
        tmp_path: Path) -> None:
    from floodmark.controller.logic import ControllerLogic

    c = LocalController(tmp_path, node_id=1)
    assert type(c.logic) is ControllerLogic  # one controller: the single broker runs the logic
    asyncio.run(c.create_topic("orders", 2, 1, {}))
    assert [p.leader_epoch for p in c.topics()["orders"].partitions] == [0, 0]
    c.close()
    again = LocalController(tmp_path, node_id=1)  # a restart: a new incarnation of node 1
    parts = again.topics()["orders"].partitions
    assert all(p.leader == 1 and p.isr == (1,) for p in parts)
    assert [p.leader_epoch for p in parts] == [2, 2]  # fenced (leaderless), then elected
    again.close()


def test_local_controller_imports_the_json_document_of_earlier_versions(tmp_path: Path) -> None:
    import json

    doc = {"version": 1, "cluster_id": "abcdefghijklmnopqrstuv", "producer_id_limit": 3000,
           "topics": [{"name": "t", "topic_id": "8f0e3c0e-1f1a-4d4b-9c6e-0a6f2f6a1b2c",
                       "internal": False, "configs": {"retention.ms": "5"},
                       "partitions": [{"partition": 0, "leader": 1, "leader_epoch": 4,
                                       "replicas": [1], "isr": [1]}]}]}
    (tmp_path / "floodmark-metadata.json").write_text(json.dumps(doc))
    c = LocalController(tmp_path, node_id=1)
    assert c.cluster_id == "abcdefghijklmnopqrstuv"
    meta = c.topics()["t"]
    assert str(meta.topic_id) == doc["topics"][0]["topic_id"]  # type: ignore[index]
    assert meta.configs == {"retention.ms": "5"}
    assert meta.partitions[0].leader == 1 and meta.partitions[0].leader_epoch == 4
    assert asyncio.run(c.allocate_producer_id()) >= 3000  # never an id handed out before
    assert not (tmp_path / "floodmark-metadata.json").exists()
    assert (tmp_path / "floodmark-metadata.json.imported").exists()
    c.close()


def test_group_rebalance_two_members_then_leave() -> None:
    async def scenario() -> None:
        gc = GroupCoordinator(initial_rebalance_delay_ms=50, min_session_timeout_ms=10,
                              max_session_timeout_ms=60_000)
        common = dict(group_id="g", group_instance_id=None, client_host="/h",
                      session_timeout_ms=10_000, rebalance_timeout_ms=1000,
                      protocol_type="consumer")
        first = await gc.join(member_id="", client_id="a", protocols=[("range", b"A")],
                              require_known_member_id=True, **common)
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED
        a_id = first.member_id
        ja = asyncio.ensure_future(gc.join(member_id=a_id, client_id="a",
                                           protocols=[("range", b"A")],
                                           require_known_member_id=True, **common))
        jb = asyncio.ensure_future(gc.join(member_id="", client_id="b",
                                           protocols=[("range", b"B"), ("rr", b"B")],
                                           require_known_member_id=False, **common))
        ra, rb = await asyncio.wait_for(asyncio.gather(ja, jb), 5)
        assert ra.error == rb.error == ErrorCode.NONE and ra.generation_id == 1
        assert ra.protocol_name == "range" and ra.leader == a_id
        assert len(ra.members) == 2 and rb.members == []
        b_id = rb.member_id
        follower = asyncio.ensure_future(gc.sync(group_id="g", member_id=b_id, generation_id=1,
                                                 assignments=[]))
        await asyncio.sleep(0.01)
        assert not follower.done()  # waits for the leader's assignment
        err, mine, state = await gc.sync(group_id="g", member_id=a_id, generation_id=1,
                                         assignments=[(a_id, b"pa"), (b_id, b"pb")])
        assert (err, mine, state) == (ErrorCode.NONE, b"pa", GroupState.STABLE)
        assert (await follower)[:2] == (ErrorCode.NONE, b"pb")
        assert gc.heartbeat("g", a_id, 1) == ErrorCode.NONE
        assert gc.heartbeat("g", a_id, 0) == ErrorCode.ILLEGAL_GENERATION
        assert gc.validate_commit("g", b_id, 1) == ErrorCode.NONE
        assert gc.leave("g", b_id) == ErrorCode.NONE
        assert gc.heartbeat("g", a_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        again = await asyncio.wait_for(
            gc.join(member_id=a_id, client_id="a", protocols=[("range", b"A")],
                    require_known_member_id=True, **common), 5)
        assert again.generation_id == 2 and len(again.members) == 1
        assert gc.validate_commit("g", "", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # group is active
        assert gc.leave("g", a_id) == ErrorCode.NONE
        assert gc.groups["g"].state is GroupState.EMPTY
        assert gc.validate_commit("g", "", -1) == ErrorCode.NONE  # simple commits when empty
        gc.shutdown()

    asyncio.run(scenario())


def test_broker_settings_of_the_wrong_type_are_refused_at_start(tmp_path: Path) -> None:
    """Issue 11: ``--set min.insync.replicas=abc`` started a broker whose every topic creation
    then failed; now the start fails with one line."""
    with pytest.raises(ValueError, match=r"min\.insync\.replicas='abc': expected a number"):
        BrokerConfig.load(data_dir=tmp_path, overrides=["min.insync.replicas=abc"])
    with pytest.raises(ValueError, match=r"auto\.create\.topics\.enable"):
        BrokerConfig.load(data_dir=tmp_path, overrides=["auto.create.topics.enable=maybe"])
    ok = BrokerConfig.load(data_dir=tmp_path, overrides=["min.insync.replicas=2",
                                                         "log.cleaner.min.cleanable.ratio=0.1"])
    assert ok.get("min.insync.replicas") == 2 and ok.get("log.cleaner.min.cleanable.ratio") == 0.1


def test_static_member_rejoin_fences_the_old_member_id() -> None:
    """KIP-345 in the coordinator: the same group.instance.id without a member id replaces the
    member (no rebalance while stable); the old member id is FENCED_INSTANCE_ID everywhere."""
    async def scenario() -> None:
        gc = GroupCoordinator(initial_rebalance_delay_ms=0, min_session_timeout_ms=10,
                              max_session_timeout_ms=60_000)
        common = dict(group_id="g", group_instance_id="inst-1", client_host="/h",
                      session_timeout_ms=10_000, rebalance_timeout_ms=1000,
                      protocol_type="consumer", protocols=[("range", b"A")],
                      require_known_member_id=True)
        first = await asyncio.wait_for(gc.join(member_id="", client_id="a", **common), 5)
        assert first.error == ErrorCode.NONE  # static members skip MEMBER_ID_REQUIRED
        old = first.member_id
        err, _, state = await gc.sync(group_id="g", member_id=old, generation_id=1,
                                      assignments=[(old, b"pa")], group_instance_id="inst-1")
        assert err == ErrorCode.NONE and state == GroupState.STABLE
        again = await asyncio.wait_for(gc.join(member_id="", client_id="a", **common), 5)
        assert again.error == ErrorCode.NONE and again.member_id != old
        assert again.generation_id == 1  # no rebalance
        assert gc.heartbeat("g", old, 1, "inst-1") == ErrorCode.FENCED_INSTANCE_ID
        assert gc.validate_commit("g", old, 1, "inst-1") == ErrorCode.FENCED_INSTANCE_ID
        assert gc.heartbeat("g", again.member_id, 1, "inst-1") == ErrorCode.NONE
        err, mine, _ = await gc.sync(group_id="g", member_id=again.member_id, generation_id=1,
                                     assignments=[], group_instance_id="inst-1")
        assert (err, mine) == (ErrorCode.NONE, b"pa")  # its predecessor's assignment
        assert gc.leave("g", "", "inst-1") == ErrorCode.NONE  # removed by instance id
        assert gc.groups["g"].state == GroupState.EMPTY
        gc.shutdown()

    asyncio.run(scenario())


def test_group_protocol_fencing_commits_in_a_join_phase_and_timeouts() -> None:
    """Kafka's classic group rules where clients rely on them: a commit by a member of the
    current generation is accepted while the group prepares a rebalance (the revoke callback)
    and refused between JoinGroup and SyncGroup; stale generations are ILLEGAL_GENERATION
    before anything else; a member parked in SyncGroup is not expired; a lost JoinGroup answer
    is answered again without a new generation; a member that misses the rebalance timeout is
    removed and its late rejoin is UNKNOWN_MEMBER_ID (the client then joins afresh)."""
    async def scenario() -> None:
        gc = GroupCoordinator(initial_rebalance_delay_ms=0, min_session_timeout_ms=10,
                              max_session_timeout_ms=60_000)
        common = dict(group_id="g", group_instance_id=None, client_host="/h",
                      session_timeout_ms=10_000, rebalance_timeout_ms=200,
                      protocol_type="consumer", protocols=[("range", b"x")],
                      require_known_member_id=False)
        a = await asyncio.wait_for(gc.join(member_id="", client_id="a", **common), 5)
        a_id = a.member_id
        assert (await gc.sync(group_id="g", member_id=a_id, generation_id=1,
                              assignments=[(a_id, b"all")]))[0] == ErrorCode.NONE
        # b joins: the group prepares a rebalance; a has not rejoined yet
        jb = asyncio.ensure_future(gc.join(member_id="", client_id="b", **common))
        await asyncio.sleep(0.01)
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert gc.validate_commit("g", a_id, 1) == ErrorCode.NONE  # revoke-time commit
        assert gc.validate_commit("g", a_id, 0) == ErrorCode.ILLEGAL_GENERATION
        assert gc.heartbeat("g", a_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        assert gc.heartbeat("g", a_id, 0) == ErrorCode.ILLEGAL_GENERATION
        assert (await gc.sync(group_id="g", member_id=a_id, generation_id=1,
                              assignments=[]))[0] == ErrorCode.REBALANCE_IN_PROGRESS
        # a never rejoins: removed at the rebalance timeout (200 ms), b alone is generation 2
        rb = await asyncio.wait_for(jb, 5)
        assert rb.error == ErrorCode.NONE and rb.generation_id == 2 and rb.leader == rb.member_id
        assert a_id not in gc.groups["g"].members
        assert gc.heartbeat("g", a_id, 1) == ErrorCode.UNKNOWN_MEMBER_ID
        assert gc.validate_commit("g", a_id, 1) == ErrorCode.UNKNOWN_MEMBER_ID
        late = await gc.join(member_id=a_id, client_id="a", **common)
        assert late.error == ErrorCode.UNKNOWN_MEMBER_ID
        # between JoinGroup and SyncGroup: commits wait for the assignment
        assert gc.validate_commit("g", rb.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
        # a lost JoinGroup answer: the same join is answered again, same generation
        again = await asyncio.wait_for(gc.join(member_id=rb.member_id, client_id="b",
                                               **common), 5)
        assert again.generation_id == 2 and gc.groups["g"].state is GroupState.COMPLETING_REBALANCE
        # a fresh join of the late member: a new id, generation 3 with b
        ja = asyncio.ensure_future(gc.join(member_id="", client_id="a", **common))
        jb2 = asyncio.ensure_future(gc.join(member_id=rb.member_id, client_id="b", **common))
        fresh, rb2 = await asyncio.wait_for(asyncio.gather(ja, jb2), 5)
        assert fresh.member_id != a_id and fresh.generation_id == rb2.generation_id == 3
        leader, follower = (fresh, rb2) if fresh.leader == fresh.member_id else (rb2, fresh)
        parked = asyncio.ensure_future(gc.sync(group_id="g", member_id=follower.member_id,
                                               generation_id=3, assignments=[]))
        await asyncio.sleep(0.01)
        gc.expire_sessions(now_ms=time.monotonic() * 1000 + 11_000)  # past every session
        assert follower.member_id in gc.groups["g"].members  # parked in SyncGroup: alive
        assert leader.member_id not in gc.groups["g"].members  # silent: expired
        assert (await asyncio.wait_for(parked, 5))[0] == ErrorCode.REBALANCE_IN_PROGRESS
        gc.shutdown()

    asyncio.run(scenario())


def test_an_earlier_versions_bad_topic_config_is_dropped_on_import(tmp_path: Path) -> None:
    # The metadata log holds only records every reader can apply: a value the registry refuses
    # (written before it existed) is dropped, the topic and its good configs are imported.
    import json

    doc = {"version": 1, "cluster_id": "abcdefghijklmnopqrstuv", "producer_id_limit": 1000,
           "topics": [{"name": "t", "topic_id": None, "internal": False,
                       "configs": {"retention.ms": "5", "min.insync.replicas": "abc"},
                       "partitions": [{"partition": 0, "leader": 1, "leader_epoch": 0,
                                       "replicas": [1], "isr": [1]}]}]}
    (tmp_path / "floodmark-metadata.json").write_text(json.dumps(doc))
    c = LocalController(tmp_path, node_id=1)
    assert c.topics()["t"].configs == {"retention.ms": "5"}
    c.close()
