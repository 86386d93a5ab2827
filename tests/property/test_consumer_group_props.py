"""KIP-848's coordinator core under any sequence of joins, heartbeats (with lost answers),
leaves, silences and timeouts: no partition is ever held by two members, a replay of the
records rebuilds the same group, and once the members heartbeat honestly every subscribed
partition is assigned."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.errors import ErrorCode
from floodmark.groups.consumer_group import records as rec
from floodmark.groups.consumer_group.core import ConsumerGroupCoordinator, CoreConfig, Heartbeat

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": rec.TopicMetadata(T1, "a", 5), "b": rec.TopicMetadata(T2, "b", 3)}
SESSION_MS = 1_000
MEMBERS = ["m0", "m1", "m2", "m3"]
STATIC = {"m2": "i2", "m3": "i3"}  # group.instance.id of the static members
Parts = frozenset[tuple[uuid.UUID, int]]


@dataclass
class Client:
    """A cooperative client: revokes what it was not given, then takes what it was given."""

    member_id: str = ""
    epoch: int = 0
    owned: Parts = frozenset()
    joined: bool = False
    subscribed: bool = False  # the application subscribed: a fenced member rejoins    full: bool = False  # the last answer was lost: send every field (Kafka's client does)
    topics: tuple[str, ...] = ("a",)
    log: list[str] = field(default_factory=list)


step = st.tuples(st.sampled_from(["beat", "beat", "beat", "lose", "leave", "join", "wait"]),
                 st.sampled_from(MEMBERS), st.sampled_from([("a",), ("a", "b"), ("b",)]),
                 st.sampled_from(["uniform", "range", None]))


def check_exclusive(c: ConsumerGroupCoordinator) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for g in c.groups.values():
        for m in g.members.values():
            assert not (m.current.assigned & m.current.pending_revocation)
            for tp in m.holds:
                assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
                seen[tp] = m.member_id


def heartbeat(c: ConsumerGroupCoordinator, name: str, cl: Client, now_ms: int,
              assignor: str | None, lose: bool = False) -> None:
    instance = STATIC.get(name)
    if not cl.joined:
        hb = Heartbeat("g", cl.member_id, 0, rebalance_timeout_ms=SESSION_MS * 3,
                       subscribed_topic_names=cl.topics, server_assignor=assignor,
                       owned=frozenset(), instance_id=instance)
    elif cl.full:
        hb = Heartbeat("g", cl.member_id, cl.epoch, rebalance_timeout_ms=SESSION_MS * 3,
                       subscribed_topic_names=cl.topics, owned=cl.owned, instance_id=instance)
    else:
        hb = Heartbeat("g", cl.member_id, cl.epoch, owned=cl.owned, instance_id=instance)
    ans = c.heartbeat(hb, TOPICS, now_ms)
    cl.full = lose
    if lose:
        return
    if ans.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID,
                     ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNRELEASED_INSTANCE_ID):
        cl.joined, cl.epoch, cl.owned = False, 0, frozenset()
        return
    assert ans.error is ErrorCode.NONE, ans
    cl.joined, cl.epoch = True, ans.member_epoch
    if ans.assignment is not None:
        cl.owned = ans.assignment


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=60))
def test_no_partition_held_twice_and_everything_eventually_assigned(steps: list) -> None:
    c = ConsumerGroupCoordinator(CoreConfig(session_timeout_ms=SESSION_MS,
                                            heartbeat_interval_ms=100))
    restarts = 0

    def fresh(name: str) -> Client:
        nonlocal restarts
        restarts += 1
        return Client(member_id=f"{name}-{restarts}")

    clients = {m: fresh(m) for m in MEMBERS}
    log: list[rec.ConsumerGroupRecord] = []
    now = 0
    original_heartbeat = c.heartbeat

    def recording(hb: Heartbeat, topics: dict, now_ms: int):  # type: ignore[no-untyped-def]
        ans = original_heartbeat(hb, topics, now_ms)
        log.extend(ans.records)
        return ans

    c.heartbeat = recording  # type: ignore[method-assign]
    for action, name, topics, assignor in steps:
        cl = clients[name]
        now += 50
        if action == "wait":
            now += SESSION_MS  # everyone goes silent past their session
        for _, _, records in c.tick(TOPICS, now):
            log.extend(records)
        if action == "join":
            if not cl.joined:
                cl.topics = topics
            cl.subscribed = True
            heartbeat(c, name, cl, now, assignor)
        elif action in ("beat", "lose"):
            if cl.subscribed:
                heartbeat(c, name, cl, now, None, lose=action == "lose")
        elif action == "leave" and cl.joined:
            # a static member leaves with -2 and comes back as a new instance (member id)
            ans = c.heartbeat(Heartbeat("g", cl.member_id, -2 if name in STATIC else -1,
                                        instance_id=STATIC.get(name)), TOPICS, now)
            log.extend(ans.records)
            clients[name] = fresh(name)
        check_exclusive(c)
    # a replay of the records rebuilds the same state
    replayed = ConsumerGroupCoordinator(c.config)
    for r in log:
        replayed.apply(rec.decode(*rec.encode(r)))
    for gid, g in c.groups.items():
        r = replayed.groups[gid]
        assert (r.group_epoch, r.assignment_epoch, r.target) == (
            g.group_epoch, g.assignment_epoch, g.target)
        assert {m: x.current for m, x in r.members.items()} == {
            m: x.current for m, x in g.members.items()}
    # Liveness: the subscribed members heartbeat honestly (a fenced one rejoins); within a
    # bounded number of rounds the group settles, and once the static members that left are
    # past their session timeout, every subscribed partition is owned by an active member.
    def settled(static_places: bool) -> bool:
        g = c.groups.get("g")
        if g is None or not g.members:
            return True
        active = {i: m for i, m in g.members.items() if m.member_epoch != -2}
        if not static_places and len(active) < len(g.members):
            return False
        subscribed = {t for m in g.members.values()
                      for t in m.subscription.subscribed_topic_names}
        wanted = {(TOPICS[t].topic_id, p) for t in subscribed
                  for p in range(TOPICS[t].num_partitions)}
        held = {tp for m in active.values() for tp in m.current.assigned}
        # A static member that left (-2) keeps its place for its session timeout: what it
        # holds and its target wait for its next instance (Kafka's static membership).
        reserved = {tp for i, m in g.members.items() if i not in active
                    for tp in m.current.assigned | g.target.get(i, frozenset())}
        by_member_id = {cl.member_id: cl for cl in clients.values()}
        return held | reserved == wanted and g.group_epoch == g.assignment_epoch and all(
            m.member_epoch == g.assignment_epoch and m.member_id in by_member_id
            and by_member_id[m.member_id].owned == m.current.assigned
            for m in active.values())

    for static_places in (True, False):
        # rounds of 100 ms: past a rebalance timeout (a member that never got its revocation)
        # and a session timeout (a static member that left)
        for _ in range(6 * SESSION_MS // 100):
            if settled(static_places):
                break
            now += 100
            for _, _, records in c.tick(TOPICS, now):
                log.extend(records)
            for name, cl in clients.items():
                if cl.subscribed:
                    heartbeat(c, name, cl, now, None)
            check_exclusive(c)
        assert settled(static_places), c.groups.get("g")
