"""The classic group coordinator core (``broker.classic_group.core``) without asyncio: parked
JoinGroup/SyncGroup answers come out of later calls under their request ids, the generation's
assignment is answered only once stored, the core's own timers, and the broker's driver
(``broker.groups``) abandoning a request whose client went away."""

from __future__ import annotations

import asyncio
import random

from floodmark.broker.groups import GroupCoordinator
from floodmark.errors import ErrorCode
from floodmark.groups.classic_group.core import ClassicGroupConfig, ClassicGroupCore
from floodmark.groups.classic_group.effects import AnswerJoin, AnswerSync, StoreGroup
from floodmark.groups.classic_group.messages import JoinGroup, SyncGroup
from floodmark.groups.classic_group.state import GroupState


def _core(delay_ms: int = 0) -> ClassicGroupCore:
    return ClassicGroupCore(ClassicGroupConfig(delay_ms, 10, 60_000), random.Random(7))


def _join(rid: int, member_id: str = "", instance: str | None = None,
          rebalance_ms: int = 500) -> JoinGroup:
    return JoinGroup(rid, "g", member_id, instance, f"c{rid}", "/h", 10_000, rebalance_ms,
                     "consumer", (("range", b"sub"),), False)


def test_answers_wait_in_the_core_and_the_assignment_waits_for_its_record() -> None:
    core = _core()
    (a,) = core.join(_join(1), 0)
    assert isinstance(a, AnswerJoin) and a.result.generation_id == 1
    a_id = a.result.member_id
    assert core.join(_join(2), 5) == []  # b joins: a new round, b parked
    assert core.groups["g"].state is GroupState.PREPARING_REBALANCE
    out = core.join(_join(3, a_id), 6)  # a rejoins: the round completes, both answered
    answers = {e.request_id: e.result for e in out if isinstance(e, AnswerJoin)}
    assert set(answers) == {2, 3} and answers[3].leader == a_id
    b_id = answers[2].member_id
    assert core.sync(SyncGroup(4, "g", b_id, 2, ()), 7) == []  # the follower waits
    (store,) = core.sync(SyncGroup(5, "g", a_id, 2, ((a_id, b"A"), (b_id, b"B"))), 8)
    assert isinstance(store, StoreGroup) and store.token is not None
    assert store.record.generation == 2 and len(store.record.members) == 2
    assert core.commit_error("g", b_id, 2, None) is ErrorCode.REBALANCE_IN_PROGRESS
    out = core.stored(store.token, ErrorCode.NONE, 9)
    assert out == [AnswerSync(4, ErrorCode.NONE, b"B", GroupState.STABLE),
                   AnswerSync(5, ErrorCode.NONE, b"A", GroupState.STABLE)]


def test_a_failed_store_answers_the_leader_and_the_group_rebalances() -> None:
    core = _core()
    a_id = core.join(_join(1), 0)[0].result.member_id  # type: ignore[union-attr]
    (store,) = core.sync(SyncGroup(2, "g", a_id, 1, ((a_id, b"A"),)), 1)
    assert isinstance(store, StoreGroup) and store.token is not None
    assert core.sync(SyncGroup(3, "g", a_id, 1, ()), 2) == []  # a retry waits as well
    out = core.stored(store.token, ErrorCode.COORDINATOR_NOT_AVAILABLE, 3)
    assert out == [AnswerSync(3, ErrorCode.REBALANCE_IN_PROGRESS, b"",
                              GroupState.PREPARING_REBALANCE),
                   AnswerSync(2, ErrorCode.COORDINATOR_NOT_AVAILABLE, b"", None)]
    assert core.groups["g"].members[a_id].assignment == b""


def test_the_core_keeps_its_timers() -> None:
    core = _core(delay_ms=300)  # group.initial.rebalance.delay.ms
    assert core.join(_join(1, rebalance_ms=1000), 100) == []
    assert core.next_deadline_ms() == 400  # the initial delay, before the rebalance timeout
    assert core.tick(399) == []
    (a,) = core.tick(400)
    assert isinstance(a, AnswerJoin) and a.request_id == 1 and a.result.generation_id == 1
    m = core.groups["g"].members[a.result.member_id]
    assert core.next_deadline_ms() == 400 + m.session_timeout_ms + 1  # its session
    assert core.tick(400 + m.session_timeout_ms) == []
    out = core.tick(401 + m.session_timeout_ms)
    assert core.groups["g"].state is GroupState.EMPTY and not core.groups["g"].members
    assert [e.reason for e in out if isinstance(e, StoreGroup)] == ["empty"]


def test_a_static_member_is_answered_once_its_new_id_is_stored_or_keeps_its_old_id() -> None:
    core = _core()
    old = core.join(_join(1, instance="i"), 0)[0].result.member_id  # type: ignore[union-attr]
    (store,) = core.sync(SyncGroup(2, "g", old, 1, ((old, b"A"),), "i"), 1)
    assert isinstance(store, StoreGroup) and store.token is not None
    core.stored(store.token, ErrorCode.NONE, 2)
    for ok in (False, True):
        (replace,) = core.join(_join(3, instance="i"), 3)
        assert isinstance(replace, StoreGroup) and replace.token is not None
        new = core.groups["g"].static_members["i"]
        assert core.heartbeat("g", old, 1, "i", 4) is ErrorCode.FENCED_INSTANCE_ID
        (answer,) = core.stored(replace.token, ErrorCode.NONE if ok else
                                ErrorCode.NOT_ENOUGH_REPLICAS, 5)
        assert isinstance(answer, AnswerJoin) and answer.request_id == 3
        if ok:
            assert (answer.result.error, answer.result.member_id) == (ErrorCode.NONE, new)
            assert core.sync(SyncGroup(4, "g", new, 1, (), "i"), 6) == [
                AnswerSync(4, ErrorCode.NONE, b"A", GroupState.STABLE)]
        else:  # undone: the old member id is back, the new one is fenced
            assert answer.result.error is ErrorCode.NOT_ENOUGH_REPLICAS
            assert core.heartbeat("g", old, 1, "i", 6) is ErrorCode.NONE
            assert core.heartbeat("g", new, 1, "i", 6) is ErrorCode.FENCED_INSTANCE_ID


def test_the_driver_abandons_a_request_whose_client_went_away() -> None:
    async def scenario() -> None:
        gc = GroupCoordinator(initial_rebalance_delay_ms=0, min_session_timeout_ms=10,
                              max_session_timeout_ms=60_000)
        common = dict(group_id="g", group_instance_id=None, client_host="/h",
                      session_timeout_ms=10_000, rebalance_timeout_ms=100,
                      protocol_type="consumer", protocols=[("range", b"x")],
                      require_known_member_id=False)
        a = await asyncio.wait_for(gc.join(member_id="", client_id="a", **common), 5)
        jb = asyncio.ensure_future(gc.join(member_id="", client_id="b", **common))
        await asyncio.sleep(0)
        assert not jb.done()  # a new round: b waits for a to rejoin
        jb.cancel()  # b's connection closed while it waited
        await asyncio.sleep(0)
        assert not any(m.parked for m in gc.groups["g"].members.values())
        ja = asyncio.ensure_future(gc.join(member_id=a.member_id, client_id="a", **common))
        await asyncio.sleep(0)
        assert not ja.done()  # b counts as not rejoined: the round waits for its timeout
        # b did not rejoin: removed at the rebalance timeout (the driver's own timer), a alone
        ra = await asyncio.wait_for(ja, 5)
        assert ra.error is ErrorCode.NONE and ra.generation_id == 2
        assert list(gc.groups["g"].members) == [a.member_id]
        gc.shutdown()

    asyncio.run(scenario())


def _sized(max_size: int) -> ClassicGroupCore:
    return ClassicGroupCore(ClassicGroupConfig(0, 10, 60_000, max_size=max_size),
                            random.Random(7))


def test_group_max_size_turns_away_a_new_member_of_a_full_group() -> None:
    core = _sized(2)
    a = core.join(_join(1), 0)[0].result.member_id  # type: ignore[union-attr]
    assert core.join(_join(2), 1) == []  # b joins: a new round
    core.join(_join(3, a), 2)
    g = core.groups["g"]
    assert g.state is GroupState.COMPLETING_REBALANCE and len(g.members) == 2
    (refused,) = core.join(_join(4), 3)  # c: the group is full
    assert isinstance(refused, AnswerJoin)
    assert (refused.result.error, refused.result.member_id) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    assert len(g.members) == 2 and g.state is GroupState.COMPLETING_REBALANCE
    # an existing member is accepted
    assert all(not (isinstance(e, AnswerJoin) and e.result.error is
                    ErrorCode.GROUP_MAX_SIZE_REACHED) for e in core.join(_join(5, a), 4))


def test_a_group_over_a_lowered_size_keeps_the_first_members_to_rejoin() -> None:
    core = _sized(5)
    ids = []
    for rid in range(1, 4):
        out = core.join(_join(rid, rebalance_ms=60_000), rid)
        ids += [e.result.member_id for e in out if isinstance(e, AnswerJoin)]
    core.join(_join(10, ids[0], rebalance_ms=60_000), 10)
    g = core.groups["g"]
    members = list(g.members)
    assert len(members) == 3
    core.config = ClassicGroupConfig(0, 10, 60_000, max_size=2)  # group.max.size lowered
    core.rebalance("g", "test", 20)
    assert g.state is GroupState.PREPARING_REBALANCE
    assert core.join(_join(21, members[0], rebalance_ms=60_000), 21) == []
    assert core.join(_join(22, members[1], rebalance_ms=60_000), 22) == []
    # the third to rejoin finds two places taken: turned away and out of the group, so the
    # round completes with the first two
    out = core.join(_join(23, members[2], rebalance_ms=60_000), 23)
    answers = {e.request_id: e.result for e in out if isinstance(e, AnswerJoin)}
    assert answers[23].error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert {answers[21].error, answers[22].error} == {ErrorCode.NONE}
    assert set(g.members) == set(members[:2]) and g.generation_id == 3
