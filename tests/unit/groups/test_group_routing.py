"""``group_routing``: which core serves a group's request, and the conversions between the
classic and the consumer-group core as the broker's handlers and the simulator run them — the
routes for each kind of group, an upgrade that is refused or whose batch is lost (both cores as
before), a downgrade stored (the classic core takes the group over and rebalances it), and a
new coordinator's load handing each group to its core."""

from __future__ import annotations

import random
import uuid

from floodmark.client.group import encode_subscription
from floodmark.errors import ErrorCode
from floodmark.groups import routing
from floodmark.groups.classic_group.core import ClassicGroupConfig, ClassicGroupCore
from floodmark.groups.classic_group.state import GroupState
from floodmark.groups.consumer_group import records as rec
from floodmark.groups.consumer_group.core import ConsumerGroupCoordinator, CoreConfig, Heartbeat
from floodmark.groups.consumer_group.migration import (
    ClassicMember,
    ClassicSnapshot,
    MigrationPolicy,
)
from floodmark.groups.offsets import OffsetStore, encode_group_key
from floodmark.records import Record, build_batch
from floodmark.wire.consumer_protocol import encode_assignment

T = uuid.UUID(int=7)
TOPICS = {"t": rec.TopicMetadata(T, "t", 4)}


def cores(policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL, protocol_type: str = "consumer"
          ) -> tuple[ClassicGroupCore, ConsumerGroupCoordinator]:
    """A classic group "g" of two members (a: 0, 1; b: 2, 3) at generation 5, stable."""
    classic = ClassicGroupCore(ClassicGroupConfig(0, 1, 60_000, store_groups=True),
                               random.Random(1))
    sub = encode_subscription(["t"])
    snapshot = ClassicSnapshot("g", 5, protocol_type, "range", "a", tuple(
        ClassicMember(m, None, m, "/127.0.0.1", 6000, 30_000, (("range", sub),),
                      encode_assignment({"t": ps}, 0)) for m, ps in (("a", (0, 1)), ("b", (2, 3)))))
    classic.load("g", routing.record_of_snapshot(snapshot, 0), 0)
    consumer = ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=45_000,
                                                   heartbeat_interval_ms=1_000,
                                                   migration_policy=policy), random.Random(2))
    return classic, consumer


def joining(member_epoch: int = 0) -> Heartbeat:
    return Heartbeat("g", "k", member_epoch, rebalance_timeout_ms=10_000,
                     subscribed_topic_names=("t",), owned=frozenset())


def upgrade(classic: ClassicGroupCore, consumer: ConsumerGroupCoordinator,
            stored: bool) -> routing.Change:
    """A consumer-protocol member joins the classic group: the upgrade, its batch stored or
    not, as the broker's handler runs it."""
    route = routing.consumer_group_heartbeat(classic.groups, consumer, "g", 0, True)
    assert route.upgrade is not None and route.refused is None
    replaces, _ = routing.begin_upgrade(classic, route.upgrade, 0)
    assert "g" not in classic.groups
    made = routing.change(consumer, "g", lambda: routing.heartbeat(
        consumer, joining(), route.upgrade, TOPICS, 0)[1], 0, replaces)
    if not stored:
        routing.undo(classic, consumer, made, 0)
    return made


def test_each_request_goes_to_the_core_of_its_groups_kind() -> None:
    classic, consumer = cores()
    assert routing.owner(consumer, "g") is routing.Core.CLASSIC
    assert routing.join_group(consumer, "g") is routing.Join.CLASSIC
    upgrade(classic, consumer, stored=True)
    assert routing.owner(consumer, "g") is routing.Core.CONSUMER
    assert routing.join_group(consumer, "g") is routing.Join.CONSUMER
    # the generation is the member epoch now: a classic member's old generation commits
    assert routing.validate_commit(classic, consumer, "g", "a", 5, None, 8, 1) is ErrorCode.NONE
    assert routing.commit_error(classic, consumer, "g", "a", 4, None, 8) is \
        ErrorCode.ILLEGAL_GENERATION
    consumer.groups["g"].members.clear()  # an empty consumer group gives way to a JoinGroup
    assert routing.join_group(consumer, "g") is routing.Join.CONSUMER_GROUP_GIVES_WAY
    assert routing.owner(consumer, "g") is routing.Core.CONSUMER


def test_a_heartbeat_upgrades_a_classic_group_only_when_it_joins_and_the_policy_allows() -> None:
    classic, consumer = cores()
    assert routing.consumer_group_heartbeat(classic.groups, consumer, "g", 3, True).refused == \
        "the heartbeat does not join (member epoch 0)"
    for policy, protocol_type in ((MigrationPolicy.DOWNGRADE, "consumer"),
                                  (MigrationPolicy.BIDIRECTIONAL, "connect")):
        classic, consumer = cores(policy, protocol_type)
        route = routing.consumer_group_heartbeat(classic.groups, consumer, "g", 0, True)
        assert route.refused is not None and route.upgrade is None
    # an empty classic group, or only its stored record, gives way to a joining member
    classic, consumer = cores()
    classic.groups["g"].members.clear()
    assert routing.consumer_group_heartbeat(classic.groups, consumer, "g", 0, False) == \
        routing.HeartbeatRoute(classic_gives_way=True)
    assert routing.consumer_group_heartbeat({}, consumer, "h", 0, True).classic_gives_way
    assert routing.consumer_group_heartbeat({}, consumer, "h", 0, False) == \
        routing.HeartbeatRoute()


def test_an_upgrade_is_one_batch_and_a_lost_batch_leaves_the_classic_group_as_it_was() -> None:
    classic, consumer = cores()
    made = upgrade(classic, consumer, stored=True)
    pairs = made.pairs()
    assert pairs[0] == (encode_group_key("g"), None)  # the classic tombstone first
    assert len(pairs) == 1 + len(made.records) and made.classic is None
    assert set(consumer.groups["g"].members) == {"a", "b", "k"}
    assert consumer.groups["g"].group_epoch > 5  # the joining member bumped it

    classic, consumer = cores()
    upgrade(classic, consumer, stored=False)
    assert "g" not in consumer.groups
    g = classic.groups["g"]
    assert (g.generation_id, list(g.members), g.state) == (5, ["a", "b"], GroupState.STABLE)


def test_a_refused_heartbeat_converts_nothing() -> None:
    classic, consumer = cores()
    route = routing.consumer_group_heartbeat(classic.groups, consumer, "g", 0, True)
    assert route.upgrade is not None
    bad = Heartbeat("g", "k", 0, rebalance_timeout_ms=10_000)  # joins without a subscription
    ans, records = routing.heartbeat(consumer, bad, route.upgrade, TOPICS, 0)
    assert ans.error is not ErrorCode.NONE and records == [] and "g" not in consumer.groups


def test_a_downgrade_hands_the_group_to_the_classic_core_which_rebalances_once_stored() -> None:
    classic, consumer = cores()
    upgrade(classic, consumer, stored=True)
    made = routing.change(consumer, "g", lambda: consumer.heartbeat(
        Heartbeat("g", "k", -1), TOPICS, 1).records, 1)
    assert made.classic is not None and made.rebalance
    assert made.pairs()[-1][0] == encode_group_key("g") and made.pairs()[-1][1] is not None
    routing.take_over(classic, made, 1)
    g = classic.groups["g"]
    assert set(g.members) == {"a", "b"} and g.state is GroupState.STABLE
    routing.stored(classic, made, 1)
    assert g.state is GroupState.PREPARING_REBALANCE

    # the same downgrade lost: back to the consumer group, the classic group gone
    classic, consumer = cores()
    upgrade(classic, consumer, stored=True)
    made = routing.change(consumer, "g", lambda: consumer.heartbeat(
        Heartbeat("g", "k", -1), TOPICS, 1).records, 1)
    routing.take_over(classic, made, 1)
    routing.undo(classic, consumer, made, 1)
    assert "g" not in classic.groups and set(consumer.groups["g"].members) == {"a", "b", "k"}


def test_a_new_coordinator_loads_each_group_into_its_core() -> None:
    classic, consumer = cores()
    made = upgrade(classic, consumer, stored=True)
    log = made.pairs()  # the classic tombstone, then the consumer group

    def load(pairs: list[tuple[bytes, bytes | None]]
             ) -> tuple[ClassicGroupCore, ConsumerGroupCoordinator]:
        fresh_classic, fresh_consumer = cores()
        fresh_classic.groups.clear()
        batch = build_batch([Record(i, 0, k, v) for i, (k, v) in enumerate(pairs)])
        loaded = OffsetStore().load_partition(0, 1, lambda: [batch])
        routing.load(fresh_classic, fresh_consumer, loaded, 5)
        return fresh_classic, fresh_consumer

    c2, k2 = load(log)
    assert "g" not in c2.groups and set(k2.groups["g"].members) == {"a", "b", "k"}
    # then downgraded: the classic group it became
    down = routing.change(consumer, "g", lambda: consumer.heartbeat(
        Heartbeat("g", "k", -1), TOPICS, 1).records, 1)
    c3, k3 = load(log + down.pairs())
    assert "g" not in k3.groups and set(c3.groups["g"].members) == {"a", "b"}


def test_delete_groups_and_share_heartbeats_see_one_kind_per_group_id() -> None:
    classic, consumer = cores()
    # a classic group with members: DeleteGroups goes to the classic core, a share member is
    # refused
    assert routing.delete_route(False, consumer, classic.groups, False, "g") is \
        routing.Delete.CLASSIC
    assert routing.share_group_conflict(consumer, classic.groups, "g")
    # an id known only by its stored offsets is the classic core's to delete, no conflict
    assert routing.delete_route(False, consumer, classic.groups, True, "o") is \
        routing.Delete.CLASSIC
    assert not routing.share_group_conflict(consumer, classic.groups, "o")
    assert routing.delete_route(False, consumer, classic.groups, False, "o") is \
        routing.Delete.NOT_FOUND
    # a share group is deleted as one, whatever else the id has
    assert routing.delete_route(True, consumer, classic.groups, True, "g") is \
        routing.Delete.SHARE
    upgrade(classic, consumer, stored=True)
    assert routing.delete_route(False, consumer, classic.groups, True, "g") is \
        routing.Delete.CONSUMER
    consumer.groups["g"].members.clear()  # an empty consumer group is still one
    assert routing.delete_route(False, consumer, classic.groups, False, "g") is \
        routing.Delete.CONSUMER
    assert routing.share_group_conflict(consumer, classic.groups, "g")
