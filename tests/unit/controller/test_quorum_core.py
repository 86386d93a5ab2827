"""The controller quorum's core (KIP-595 + KIP-996), driven by hand through the one driver over
real ``Log``s and ``quorum-state`` files on in-memory disks; the test is the network."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import pytest

from floodmark.controller.quorum.core import QuorumConfig, QuorumCore
from floodmark.controller.quorum.driver import QuorumDriver
from floodmark.controller.quorum.effects import RoleChanged
from floodmark.controller.quorum.messages import (
    QuorumFetchRequest,
    QuorumFetchResponse,
    QuorumMessage,
    VoteRequest,
    VoteResponse,
)
from floodmark.controller.quorum.roles import (
    ElectionState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
)
from floodmark.controller.quorum.rules import (
    leader_high_watermark,
    log_is_up_to_date,
    majority,
    majority_end_offset,
)
from floodmark.controller.quorum.state_file import CorruptQuorumStateError, QuorumStateFile
from floodmark.controller.quorum.voter_set import VoterDirectory
from floodmark.errors import ErrorCode
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log

TIMEOUTS = {"election_timeout_ms": 100, "fetch_timeout_ms": 200, "request_timeout_ms": 50,
            "election_backoff_max_ms": 100}


@dataclass
class Node:
    node_id: int
    voters: tuple[int, ...]
    fs: MemoryFileSystem = field(default_factory=MemoryFileSystem)
    outbox: list[tuple[int, QuorumMessage, bytes]] = field(default_factory=list)
    roles: list[RoleChanged] = field(default_factory=list)
    driver: QuorumDriver | None = None
    fetch_max_bytes: int = 1 << 20

    def start(self, now_ms: int = 0) -> Node:
        self.fs.mkdirs("/c")
        log = Log.open("/c/__cluster_metadata-0", LogConfig(), fs=self.fs, now_ms=now_ms)
        state = QuorumStateFile(self.fs, "/c")
        core = QuorumCore(QuorumConfig(self.node_id, self.voters, **TIMEOUTS), state.read(),
                          random.Random(self.node_id))
        self.driver = QuorumDriver(core, log, state, self, self.fetch_max_bytes)
        self.driver.start(now_ms)
        return self

    @property
    def core(self) -> QuorumCore:
        assert self.driver is not None
        return self.driver.core

    @property
    def log(self) -> Log:
        assert self.driver is not None
        return self.driver.log

    # QuorumPorts
    def send(self, destination: int, message: QuorumMessage, records: bytes) -> None:
        self.outbox.append((destination, message, records))

    def high_watermark_changed(self, old: int, new: int) -> None:
        pass

    def role_changed(self, change: RoleChanged) -> None:
        self.roles.append(change)


def flush(nodes: dict[int, Node], now_ms: int, *, drop: set[int] | None = None,
          rounds: int = 50) -> None:
    """Deliver every message (and the answers they cause) until quiet; ``drop``: nodes cut off."""
    for _ in range(rounds):
        moved = False
        for node in nodes.values():
            out, node.outbox = node.outbox, []
            for dst, message, records in out:
                if drop and (dst in drop or node.node_id in drop):
                    continue
                target = nodes[dst].driver
                assert target is not None
                target.deliver(node.node_id, message, records, now_ms)
                moved = True
        if not moved:
            return


def cluster(n: int = 3) -> dict[int, Node]:
    voters = tuple(range(1, n + 1))
    return {i: Node(i, voters).start() for i in voters}


def elect(nodes: dict[int, Node], who: int, now_ms: int) -> int:
    """Let ``who`` time out first and win; returns the time after the election."""
    node = nodes[who]
    now_ms = max(now_ms, node.core.next_deadline_ms())
    node.driver.tick(now_ms)  # type: ignore[union-attr]
    flush(nodes, now_ms)
    return now_ms


def test_rules() -> None:
    assert [majority(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert majority_end_offset([5]) == 5
    assert majority_end_offset([9, 4, 7]) == 7
    assert majority_end_offset([9, -1, -1]) == -1
    assert majority_end_offset([10, 8, 3, 2, 1]) == 3
    # Epoch first, then offset.
    assert log_is_up_to_date(3, 1, 2, 100)
    assert not log_is_up_to_date(2, 100, 3, 1)
    assert log_is_up_to_date(2, 5, 2, 5) and not log_is_up_to_date(2, 4, 2, 5)
    # Only past the epoch start; never backwards.
    assert leader_high_watermark(0, 10, 12, [11, 0]) == 11
    assert leader_high_watermark(0, 10, 12, [10, 0]) == 0  # the epoch's first record uncommitted
    assert leader_high_watermark(11, 10, 12, [5, 0]) == 11


def test_config_refuses_bad_voter_lists() -> None:
    with pytest.raises(ValueError, match="distinct"):
        QuorumConfig(1, (1, 1))
    assert QuorumConfig(4, (1, 2, 3)).voters == (1, 2, 3)  # node 4: an observer (KIP-853)
    with pytest.raises(ValueError, match="positive"):
        QuorumConfig(1, (1,), election_timeout_ms=0)


def test_one_voter_elects_itself_at_start_and_commits_alone() -> None:
    node = Node(1, (1,)).start()
    assert isinstance(node.core.role, Leader) and node.core.epoch == 1
    # The epoch's first record (leader change) is committed at once: a majority of one.
    assert node.log.log_end_offset == 1 and node.core.high_watermark == 1
    first, last = node.driver.append_as_leader([b"a", b"b"], 5)  # type: ignore[union-attr]
    assert (first, last) == (1, 2) and node.core.high_watermark == 3
    # A restart comes back in a new epoch, the log intact.
    again = Node(1, (1,), fs=node.fs).start(10)
    assert isinstance(again.core.role, Leader) and again.core.epoch == 2
    assert again.log.log_end_offset == 4 and again.core.high_watermark == 4


def test_pre_vote_then_vote_then_begin_quorum_epoch() -> None:
    nodes = cluster()
    assert all(isinstance(n.core.role, Unattached) for n in nodes.values())
    node = nodes[1]
    now = node.core.next_deadline_ms()
    node.driver.tick(now)  # type: ignore[union-attr]
    # The pre-vote changes nobody: same epoch, no vote persisted by anyone.
    assert isinstance(node.core.role, Prospective) and node.core.epoch == 0
    requests = [m for _, m, _ in node.outbox]
    assert all(isinstance(m, VoteRequest) and m.pre_vote for m in requests)
    flush(nodes, now)
    assert isinstance(node.core.role, Leader) and node.core.epoch == 1
    for other in (2, 3):
        assert isinstance(nodes[other].core.role, Follower)
        assert nodes[other].core.leader_id == 1
        stored = QuorumStateFile(nodes[other].fs, "/c").read()
        assert stored.epoch == 1 and stored.leader_id == 1
    assert [r.role for r in node.roles] == ["unattached", "prospective", "candidate", "leader"]
    assert QuorumStateFile(node.fs, "/c").read() == ElectionState(1, 1, 1)


def test_followers_fetch_and_the_majority_commits_the_leaders_epoch_only() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    leader = nodes[1]
    assert leader.core.high_watermark == 0  # the leader-change record is not on a majority yet
    leader.driver.append_as_leader([b"x"], now)  # type: ignore[union-attr]
    for f in (2, 3):
        nodes[f].driver.tick(now)  # type: ignore[union-attr]  # fetch
    flush(nodes, now)
    for f in (2, 3):
        nodes[f].driver.tick(now)  # type: ignore[union-attr]  # fetch again: reports LEO 2
    flush(nodes, now)
    assert leader.core.high_watermark == 2
    # Followers learn it one fetch late.
    for f in (2, 3):
        nodes[f].driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now)
    assert [nodes[f].core.high_watermark for f in (2, 3)] == [2, 2]
    desc = leader.core.describe(leader.log)
    assert desc.leader_id == 1 and desc.leader_epoch == 1 and desc.high_watermark == 2
    assert [(v.voter_id, v.log_end_offset) for v in desc.voters] == [(1, 2), (2, 2), (3, 2)]


def test_a_voter_never_votes_for_a_shorter_log_nor_twice_in_an_epoch() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    nodes[1].driver.append_as_leader([b"x"], now)  # type: ignore[union-attr]
    for f in (2,):
        nodes[f].driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now)
    voter = nodes[2]
    voter.outbox.clear()
    # Node 3 missed everything: its (last epoch, end offset) is behind node 2's.
    voter.driver.deliver(3, VoteRequest(5, 3, -1, 0), b"", now)  # type: ignore[union-attr]
    (_, answer, _), = voter.outbox
    assert isinstance(answer, VoteResponse) and not answer.vote_granted and answer.epoch == 5
    voter.outbox.clear()
    # An up-to-date candidate gets the vote, persisted before the answer; a second one in the
    # same epoch does not.
    voter.driver.deliver(1, VoteRequest(5, 1, 1, 2), b"", now)  # type: ignore[union-attr]
    assert voter.outbox[-1][1] == VoteResponse(2, 5, -1, True)
    assert QuorumStateFile(voter.fs, "/c").read() == ElectionState(5, -1, 1)
    voter.driver.deliver(3, VoteRequest(5, 3, 9, 99), b"", now)  # type: ignore[union-attr]
    assert voter.outbox[-1][1] == VoteResponse(2, 5, -1, False)


def test_a_follower_with_a_live_leader_refuses_pre_votes() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    follower = nodes[2]
    follower.driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now)  # a successful fetch
    follower.outbox.clear()
    follower.driver.deliver(3, VoteRequest(1, 3, 1, 1, pre_vote=True), b"", now)  # type: ignore[union-attr]
    answer = follower.outbox[-1][1]
    assert answer == VoteResponse(2, 1, 1, False, pre_vote=True)
    assert isinstance(follower.core.role, Follower) and follower.core.epoch == 1


def _fetched(nodes: dict[int, Node], now: int) -> None:
    """Every follower fetches once, successfully."""
    for node in nodes.values():
        if isinstance(node.core.role, Follower):
            node.driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now)


def test_a_dead_leaders_closed_connection_elects_a_successor_before_the_fetch_timeout(
        ) -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    _fetched(nodes, now)
    assert all(isinstance(nodes[i].core.role, Follower) for i in (2, 3))
    # Leader 1's process dies: both followers' connections to it close (the shell reports it).
    for i in (2, 3):
        nodes[i].driver.leader_disconnected(1, now)  # type: ignore[union-attr]
        role = nodes[i].core.role
        assert isinstance(role, Follower) and role.leader_disconnected
        assert role.fetch_deadline_ms <= now + TIMEOUTS["election_timeout_ms"] // 5
    def deadline(i: int) -> int:
        role = nodes[i].core.role
        assert isinstance(role, Follower)
        return role.fetch_deadline_ms

    first = min((2, 3), key=deadline)
    at = deadline(first)
    assert at < now + TIMEOUTS["fetch_timeout_ms"]
    nodes[first].driver.tick(at)  # type: ignore[union-attr]
    flush(nodes, at, drop={1})
    assert nodes[first].core.is_leader and nodes[first].core.epoch == 2
    other = nodes[5 - first].core
    assert isinstance(other.role, Follower) and other.leader_id == first


def test_a_closed_connection_does_not_depose_a_leader_a_majority_still_fetches_from() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    _fetched(nodes, now)
    # Only voter 2 saw a connection to the leader close (the leader is alive, 3 fetches).
    nodes[2].driver.leader_disconnected(1, now)  # type: ignore[union-attr]
    role = nodes[2].core.role
    assert isinstance(role, Follower)
    at = role.fetch_deadline_ms
    nodes[2].driver.tick(at)  # type: ignore[union-attr]
    assert isinstance(nodes[2].core.role, Prospective)
    flush(nodes, at)  # 3 refuses the pre-vote naming leader 1; so does the leader
    assert nodes[1].core.is_leader and nodes[1].core.epoch == 1
    assert all(nodes[i].core.epoch == 1 and nodes[i].core.leader_id == 1 for i in (2, 3))
    role = nodes[2].core.role
    assert isinstance(role, Follower) and not role.leader_disconnected


def test_diverging_follower_truncates_through_the_epoch_cache() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    for f in (2, 3):
        nodes[f].driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now)
    # Leader 1 writes two records nobody else gets, then is cut off.
    nodes[1].driver.append_as_leader([b"lost1", b"lost2"], now)  # type: ignore[union-attr]
    nodes[1].outbox.clear()
    assert nodes[1].log.log_end_offset == 3
    # Node 2 times out, wins epoch 2 with node 3 and writes its own record.
    roles = [nodes[f].core.role for f in (2, 3)]
    now = max(r.fetch_deadline_ms for r in roles if isinstance(r, Follower))
    nodes[3].driver.tick(now)  # type: ignore[union-attr]  # fetch timeout: prospective
    nodes[3].outbox.clear()
    nodes[2].driver.tick(now)  # type: ignore[union-attr]
    assert isinstance(nodes[2].core.role, Prospective)
    flush(nodes, now, drop={1})
    assert isinstance(nodes[2].core.role, Leader) and nodes[2].core.epoch == 2
    # Node 1 learns epoch 2, fetches with its last epoch 1 at offset 3: the leader answers a
    # diverging epoch and node 1 cuts exactly its two uncommitted records.
    nodes[1].outbox.clear()
    now += nodes[2].core.config.request_timeout_ms
    nodes[2].driver.tick(now)  # type: ignore[union-attr]  # BeginQuorumEpoch resent to 1
    flush(nodes, now)
    assert isinstance(nodes[1].core.role, Follower) and nodes[1].core.leader_id == 2
    for _ in range(4):
        nodes[1].driver.tick(now)  # type: ignore[union-attr]
        flush(nodes, now)
    entries = [bytes(r.value or b"") for r in _records(nodes[1].log)]
    assert b"lost1" not in entries and b"lost2" not in entries
    assert _records(nodes[1].log) == _records(nodes[2].log)
    assert [(e.epoch, e.start_offset) for e in nodes[1].log.epoch_cache.entries()] == [
        (1, 0), (2, 1)]


def test_leader_resigns_without_a_quorum_and_restarts_resigned() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    leader = nodes[1]
    deadline = leader.core.next_deadline_ms()
    for t in range(now, deadline + leader.core.config.check_quorum_timeout_ms + 2, 10):
        leader.driver.tick(t)  # type: ignore[union-attr]
    assert isinstance(leader.core.role, Resigned)
    restarted = Node(1, (1, 2, 3), fs=leader.fs).start(1000)
    assert isinstance(restarted.core.role, Resigned) and restarted.core.epoch == 1


def test_corrupt_quorum_state_is_refused() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/c")
    handle = fs.open("/c/quorum-state")
    handle.write(b"{not json")
    handle.close()
    with pytest.raises(CorruptQuorumStateError, match="refusing to start"):
        QuorumStateFile(fs, "/c").read()


def test_stale_fetch_answers_are_ignored() -> None:
    nodes = cluster()
    now = elect(nodes, 1, 0)
    follower = nodes[2]
    follower.driver.tick(now)  # type: ignore[union-attr]
    leo = follower.log.log_end_offset
    (dst, request, _), = follower.outbox
    assert dst == 1 and isinstance(request, QuorumFetchRequest) and request.fetch_offset == leo
    # An answer for another fetch offset (a log that moved) appends nothing and changes no HW.
    answer = QuorumFetchResponse(ErrorCode.NONE, 1, 1, leo + 7, 5, 0, leo + 8, read_from=leo + 7,
                                 read_upto=leo + 8)
    follower.driver.deliver(1, answer, b"", now)  # type: ignore[union-attr]
    assert follower.log.log_end_offset == leo and follower.core.high_watermark == 0


def _records(log: Log) -> list[object]:
    from floodmark.records import decode_records

    return list(decode_records(log.read_all())) if log.log_end_offset else []


def _run(nodes: dict[int, Node], alive: set[int], now: int, done: object,
         limit_ms: int = 5000) -> int:
    """Tick the live nodes every 10 ms and deliver among them until ``done()``."""
    dead = set(nodes) - alive
    for now in range(now, now + limit_ms, 10):  # noqa: B020 - the last time is returned
        for i in sorted(alive):
            nodes[i].driver.tick(now)  # type: ignore[union-attr]
        flush(nodes, now, drop=dead)
        if done():  # type: ignore[operator]
            return now
    raise AssertionError("no progress")


def _values(node: Node) -> list[bytes]:
    return [bytes(r.value or b"") for r in _records(node.log)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("epoch_rule", [True, False])
def test_figure_8_an_older_epochs_record_commits_only_through_the_leaders_own(
        epoch_rule: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raft's Figure 8 with three voters. S1 (epoch 3) re-replicates X, a record of epoch 1, to
    S3, so X is on a majority, and crashes before S3 has its own epoch's record; S2, whose log
    ends in epoch 2, can then win and cut X. With the rule (commit only past the leader's epoch
    start) X was never committed, so nothing committed is lost; without it (the mutation) S1
    had committed X and it is lost."""
    if not epoch_rule:
        from floodmark.controller.quorum import core as quorum_core

        def any_majority(current: int, _start: int, leader: int, others: object) -> int:
            return max(current, majority_end_offset([leader, *others]))  # type: ignore[misc]

        monkeypatch.setattr(quorum_core, "leader_high_watermark", any_majority)
    voters = (1, 2, 3)
    nodes = {i: Node(i, voters, fetch_max_bytes=1).start() for i in voters}
    s1, s2, s3 = nodes[1], nodes[2], nodes[3]
    now = elect(nodes, 1, 0)
    now = _run(nodes, {1, 2, 3}, now, lambda: all(n.core.high_watermark == 1
                                                    for n in nodes.values()))
    s1.driver.append_as_leader([b"X"], now)  # type: ignore[union-attr]  # nobody fetches it
    # S1 is cut off; S2 wins epoch 2 with S3's vote, writes its leader-change record, and dies
    # before S3 fetches it.
    now = _run(nodes, {2, 3}, now, lambda: s2.core.is_leader)
    epoch_s2 = s2.core.epoch
    assert b"X" not in _values(s3) and b"X" not in _values(s2)
    for n in nodes.values():
        n.outbox.clear()
    # S1 returns (S2 stays down) and wins epoch 3 with S3.
    now = _run(nodes, {1, 3}, now, lambda: s1.core.is_leader and s1.core.epoch > epoch_s2)
    for n in nodes.values():
        n.outbox.clear()
    assert _values(s3) == [_values(s1)[0]]  # S3 holds only the first leader-change record
    # S3 fetches one batch (X), then reports LEO 2; S1's answer (its epoch-3 record) is lost
    # with S1, which crashes.
    s3.driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now, drop={2}, rounds=1)  # the fetch at offset 1 reaches S1
    flush(nodes, now, drop={2}, rounds=1)  # the answer (one batch: X) reaches S3
    now += 1
    assert _values(s3)[-1] == b"X"
    s3.driver.tick(now)  # type: ignore[union-attr]
    flush(nodes, now, drop={2}, rounds=1)  # S3's fetch at offset 2 reaches S1; answer dropped
    for n in nodes.values():
        n.outbox.clear()
    x_committed_by_s1 = s1.core.high_watermark >= 2
    assert x_committed_by_s1 is not epoch_rule
    # S1 is gone; S2 returns and can win epoch 4: its last epoch (2) beats S3's (1).
    now = _run(nodes, {2, 3}, now + 1000, lambda: s2.core.is_leader and _values(s3) == _values(s2))
    assert s2.core.epoch > s1.core.epoch and b"X" not in _values(s2) + _values(s3)
    # Lost X was committed only without the rule.
    assert (not epoch_rule) == x_committed_by_s1


# -- snapshots (KIP-630) -------------------------------------------------------------------------
def test_the_leader_answers_a_fetch_it_cannot_serve_from_its_log_with_its_snapshot_id() -> None:
    from floodmark.controller.quorum.messages import FetchSnapshotRequest, FetchSnapshotResponse

    leader = Node(1, (1,)).start()
    core, log = leader.core, leader.log
    assert core.is_leader
    for _ in range(3):
        leader.driver.append_as_leader([b"a", b"b"], 10)  # type: ignore[union-attr]
    epoch, hw = core.epoch, core.high_watermark
    assert hw == log.log_end_offset == 7
    core.snapshot_written(5, epoch, 1234)
    log.maybe_increment_log_start_offset(5, hw)

    def answer(message: QuorumMessage) -> QuorumMessage:
        sends = [e for e in core.handle(2, message, log, 20) if hasattr(e, "message")]
        assert len(sends) == 1
        return sends[0].message  # type: ignore[union-attr,no-any-return]

    below = answer(QuorumFetchRequest(2, epoch, 0, -1))
    assert isinstance(below, QuorumFetchResponse) and not below.has_records
    assert (below.snapshot_end_offset, below.snapshot_epoch) == (5, epoch)
    # At or above the log start, in an epoch the cache still places: records, no snapshot.
    ok = answer(QuorumFetchRequest(2, epoch, 6, epoch))
    assert isinstance(ok, QuorumFetchResponse) and ok.snapshot_end_offset == -1 and ok.has_records
    # A last fetched epoch older than the cut cache's first: its end offset would be a guess.
    old = answer(QuorumFetchRequest(2, epoch, 6, epoch - 1))
    assert isinstance(old, QuorumFetchResponse) and old.snapshot_end_offset == 5
    # FetchSnapshot: the current snapshot in chunks; a replaced one, a bad position refused.
    chunk = answer(FetchSnapshotRequest(2, epoch, 5, epoch, 100))
    assert isinstance(chunk, FetchSnapshotResponse)
    assert (chunk.error, chunk.size, chunk.position) == (ErrorCode.NONE, 1234, 100)
    stale = answer(FetchSnapshotRequest(2, epoch, 3, epoch, 0))
    assert isinstance(stale, FetchSnapshotResponse)
    assert stale.error is ErrorCode.SNAPSHOT_NOT_FOUND
    beyond = answer(FetchSnapshotRequest(2, epoch, 5, epoch, 5000))
    assert isinstance(beyond, FetchSnapshotResponse)
    assert beyond.error is ErrorCode.POSITION_OUT_OF_RANGE
    fenced = answer(FetchSnapshotRequest(2, epoch + 1, 5, epoch, 0))
    assert isinstance(fenced, FetchSnapshotResponse) and fenced.error is not ErrorCode.NONE


# -- KIP-853: the voter set as replicated state (AddRaftVoter, RemoveRaftVoter) ---------------
def _with_observer() -> tuple[dict[int, Node], int]:
    """Voters 1..3 with 1 leading and a committed record of its epoch, and controller 4 (not
    in the bootstrap set) fetching from 1 as an observer, caught up."""
    voters = (1, 2, 3)
    nodes = {i: Node(i, voters).start() for i in (1, 2, 3, 4)}
    now = elect({i: nodes[i] for i in voters}, 1, 0)
    assert nodes[1].core.is_leader
    nodes[1].driver.append_as_leader([b"a"], now)  # type: ignore[union-attr]
    leader = nodes[1].core

    def caught_up() -> bool:  # the leader has seen 4 fetch from its end offset
        seen = leader.role.observer(4) if isinstance(leader.role, Leader) else None
        end = nodes[1].log.log_end_offset
        return (seen is not None and seen.observed_offset == end
                and leader.high_watermark == end and isinstance(nodes[4].core.role, Follower))

    now = _run(nodes, {1, 2, 3, 4}, now, caught_up)
    assert not nodes[4].core.is_voter and nodes[4].core.voters == (1, 2, 3)
    return nodes, now


def test_an_observer_is_added_once_caught_up_and_the_set_is_in_every_log() -> None:
    nodes, now = _with_observer()
    leader = nodes[1].driver
    assert leader is not None
    error, _message, offset = leader.add_voter(4, "", now)
    assert error is ErrorCode.NONE and offset >= 0
    assert nodes[1].core.voters == (1, 2, 3, 4)  # in force from the append, not the commit
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: nodes[1].core.high_watermark > offset
               and all(n.core.high_watermark > offset for n in nodes.values()))
    assert all(n.core.voters == (1, 2, 3, 4) for n in nodes.values())
    assert nodes[4].core.is_voter
    assert b'"type": "voter_set"' in _values(nodes[2])[offset]
    # Four voters: a majority is three, so two voters alone no longer commit.
    leader.append_as_leader([b"b"], now)
    end = nodes[1].log.log_end_offset
    _run(nodes, {1, 2}, now, lambda: nodes[2].log.log_end_offset == end, limit_ms=200)
    assert nodes[1].core.high_watermark < end


def test_voter_changes_answer_as_kafka_does() -> None:
    nodes, now = _with_observer()
    leader, follower = nodes[1].driver, nodes[2].driver
    assert leader is not None and follower is not None
    assert follower.add_voter(4, "", now)[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.add_voter(2, "", now)[0] is ErrorCode.DUPLICATE_VOTER
    assert leader.add_voter(7, "", now)[0] is ErrorCode.REQUEST_TIMED_OUT  # not fetching
    assert leader.add_voter(4, "other-dir", now)[0] is ErrorCode.REQUEST_TIMED_OUT
    assert leader.remove_voter(9, "", now)[0] is ErrorCode.VOTER_NOT_FOUND
    assert leader.remove_voter(3, "", now)[0] is ErrorCode.NONE
    # One change at a time: the next waits until the previous one is committed.
    assert leader.add_voter(4, "", now)[0] is ErrorCode.REQUEST_TIMED_OUT
    assert leader.remove_voter(2, "", now)[0] is ErrorCode.REQUEST_TIMED_OUT
    assert nodes[1].core.voters == (1, 2)


def test_a_leader_that_removes_itself_resigns_after_commit_and_never_stands_again() -> None:
    nodes, now = _with_observer()
    leader = nodes[1].driver
    assert leader is not None
    assert leader.add_voter(4, "", now)[0] is ErrorCode.NONE
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: all(
        n.core.high_watermark == nodes[1].log.log_end_offset for n in nodes.values()))
    error, _message, offset = leader.remove_voter(1, "", now)
    assert error is ErrorCode.NONE
    since = len(nodes[1].roles)
    assert nodes[1].core.is_leader  # until the removal is committed
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: not nodes[1].core.is_leader)
    assert nodes[1].core.high_watermark > offset
    assert isinstance(nodes[1].core.role, Resigned)
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: any(
        n.core.is_leader for n in nodes.values() if n.node_id != 1))
    new_leader = next(n for n in nodes.values() if n.core.is_leader)
    assert new_leader.core.voters == (2, 3, 4)
    # Node 1 follows as an observer; it never campaigns again.
    new_leader.driver.append_as_leader([b"after"], now)  # type: ignore[union-attr]
    end = new_leader.log.log_end_offset
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: nodes[1].log.log_end_offset == end
               and nodes[1].core.high_watermark == end)
    assert not nodes[1].core.is_voter
    assert [r.role for r in nodes[1].roles[since:]
            if r.role in ("prospective", "candidate", "leader")] == []


def test_an_uncommitted_voter_set_is_cut_with_its_record() -> None:
    voters = (1, 2, 3)
    nodes = {i: Node(i, voters).start() for i in voters}
    now = elect(nodes, 1, 0)
    now = _run(nodes, {1, 2, 3}, now, lambda: all(n.core.high_watermark == 1
                                                  for n in nodes.values()))
    assert nodes[1].driver.remove_voter(3, "", now)[0] is ErrorCode.NONE  # type: ignore[union-attr]
    nodes[1].outbox.clear()  # nobody gets it
    assert nodes[1].core.voters == (1, 2)
    now = _run(nodes, {2, 3}, now + 1, lambda: any(n.core.is_leader for n in (nodes[2],
                                                                              nodes[3])))
    now = _run(nodes, {1, 2, 3}, now, lambda: nodes[1].log.log_end_offset == max(
        nodes[2].log.log_end_offset, nodes[3].log.log_end_offset) and not nodes[1].core.is_leader
        and nodes[1].core.high_watermark == nodes[1].log.log_end_offset)
    assert nodes[1].core.voters == (1, 2, 3)
    assert nodes[1].core.voter_sets == ()


def test_the_voter_set_survives_a_restart() -> None:
    nodes, now = _with_observer()
    assert nodes[1].driver.add_voter(4, "", now)[0] is ErrorCode.NONE  # type: ignore[union-attr]
    _run(nodes, {1, 2, 3, 4}, now, lambda: all(
        n.core.high_watermark == nodes[1].log.log_end_offset for n in nodes.values()))
    stored = QuorumStateFile(nodes[2].fs, "/c").read()
    assert [e.ids for e in stored.voter_sets] == [(1, 2, 3, 4)]
    restarted = Node(2, (1, 2, 3), fs=nodes[2].fs).start()
    assert restarted.core.voters == (1, 2, 3, 4)


@pytest.mark.parametrize("one_at_a_time", [True, False])
def test_two_changes_at_once_let_two_disjoint_majorities_commit(
        one_at_a_time: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why one change at a time: leader c1 of {1,2,3} removes c3, then c2 before the first is
    committed. Without the rule (the mutation) its set in force is {1}, so it commits X alone,
    while c2 and c3, which never got the records, still count {1,2,3}: they elect c2, which
    commits its own records past X's offset — one offset committed twice. With the rule the second change is
    refused (REQUEST_TIMED_OUT) and X needs c2's copy."""
    from floodmark.controller.quorum import core as quorum_core
    if not one_at_a_time:
        monkeypatch.setattr(quorum_core, "uncommitted", lambda *_args: False)
    voters = (1, 2, 3)
    nodes = {i: Node(i, voters).start() for i in voters}
    now = elect(nodes, 1, 0)
    now = _run(nodes, {1, 2, 3}, now, lambda: all(n.core.high_watermark == 1
                                                  for n in nodes.values()))
    c1 = nodes[1].driver
    assert c1 is not None
    assert c1.remove_voter(3, "", now)[0] is ErrorCode.NONE
    second = c1.remove_voter(2, "", now)[0]
    first, _ = c1.append_as_leader([b"X"], now)
    nodes[1].outbox.clear()  # c1 is cut off from here on
    if one_at_a_time:
        assert second is ErrorCode.REQUEST_TIMED_OUT
        assert nodes[1].core.high_watermark <= first  # X waits for c2's copy
        return
    assert second is ErrorCode.NONE and nodes[1].core.voters == (1,)
    assert nodes[1].core.high_watermark > first  # X committed by c1 alone
    _run(nodes, {2, 3}, now + 1, lambda: nodes[2].core.is_leader or nodes[3].core.is_leader)
    new = nodes[2] if nodes[2].core.is_leader else nodes[3]
    while new.log.log_end_offset <= first:
        new.driver.append_as_leader([b"Y"], now)  # type: ignore[union-attr]
    _run(nodes, {2, 3}, now + 1, lambda: new.core.high_watermark > first)
    # Offset ``first`` is committed twice: X by c1 alone, another record by c2 and c3.
    assert _values(nodes[1])[first] == b"X" and _values(new)[first] != b"X"
    assert nodes[1].core.high_watermark > first and new.core.high_watermark > first


# -- UpdateRaftVoter (KIP-853) ------------------------------------------------------------------
def test_update_voter_writes_the_new_endpoint_into_every_voters_set() -> None:
    nodes, now = _with_observer()
    leader = nodes[1].driver
    assert leader is not None
    error, _message, offset = leader.update_voter(3, "", "127.0.0.1:9403", now)
    assert error is ErrorCode.NONE and offset >= 0
    assert nodes[1].core.voters == (1, 2, 3)  # the same voters
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: all(
        n.core.high_watermark > offset for n in nodes.values()))
    for n in nodes.values():
        assert n.core.voter_endpoints(n.log) == {3: "127.0.0.1:9403"}
    assert b'"endpoints": [[3, "127.0.0.1:9403"]]' in _values(nodes[2])[offset]
    # A later change keeps the endpoints of the voters that stay, and the file keeps them.
    assert leader.add_voter(4, "", now)[0] is ErrorCode.NONE
    _run(nodes, {1, 2, 3, 4}, now, lambda: all(
        n.core.high_watermark == nodes[1].log.log_end_offset for n in nodes.values()))
    restarted = Node(2, (1, 2, 3), fs=nodes[2].fs).start()
    assert restarted.core.voters == (1, 2, 3, 4)
    assert restarted.core.voter_endpoints(restarted.log) == {3: "127.0.0.1:9403"}


def test_update_voter_answers_as_kafkas_update_voter_handler() -> None:
    nodes, now = _with_observer()
    leader, follower = nodes[1].driver, nodes[2].driver
    assert leader is not None and follower is not None
    assert follower.update_voter(3, "", "h:1", now)[0] is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.update_voter(4, "", "h:1", now)[0] is ErrorCode.VOTER_NOT_FOUND  # observer
    assert leader.update_voter(9, "", "h:1", now)[0] is ErrorCode.VOTER_NOT_FOUND
    assert leader.update_voter(3, "", "", now)[0] is ErrorCode.INVALID_REQUEST  # no listener
    assert leader.update_voter(3, "", "h:1", now)[0] is ErrorCode.NONE
    # One change at a time, an update included.
    assert leader.update_voter(2, "", "h:2", now)[0] is ErrorCode.REQUEST_TIMED_OUT
    assert leader.remove_voter(2, "", now)[0] is ErrorCode.REQUEST_TIMED_OUT
    assert leader.add_voter(4, "", now)[0] is ErrorCode.REQUEST_TIMED_OUT
    # Removing the voter drops its endpoint from the next record.
    now = _run(nodes, {1, 2, 3, 4}, now, lambda: nodes[1].core.high_watermark
               == nodes[1].log.log_end_offset)
    assert leader.remove_voter(3, "", now)[0] is ErrorCode.NONE
    assert nodes[1].core.voter_endpoints(nodes[1].log) == {}


def test_update_voter_checks_the_voters_directory() -> None:
    nodes, now = _with_observer()
    leader = nodes[1].core
    leader._stored = replace(leader._stored, directories=(
        VoterDirectory(3, "dir-3", -1),))
    log = nodes[1].log
    assert leader.update_voter(3, "dir-other", "h:1", log, now)[0] is ErrorCode.VOTER_NOT_FOUND
    assert leader.update_voter(3, "dir-3", "h:1", log, now)[0] is ErrorCode.NONE
