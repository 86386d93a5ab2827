"""KIP-853's voter key (node id + directory id) in the quorum: the pure rule
(``voter_set``), the core's use of it, and its persistence (``directory_id``, ``quorum-state``,
the codec)."""

from __future__ import annotations

import random

import pytest

from floodmark.controller.quorum.codec import decode_message, encode_message
from floodmark.controller.quorum.core import QuorumConfig, QuorumCore
from floodmark.controller.quorum.directory_id import BadMetaPropertiesError, load_or_format
from floodmark.controller.quorum.effects import Send
from floodmark.controller.quorum.messages import (
    QuorumFetchRequest,
    QuorumFetchResponse,
    VoteRequest,
    VoteResponse,
)
from floodmark.controller.quorum.roles import Candidate, ElectionState, Prospective
from floodmark.controller.quorum.state_file import QuorumStateFile
from floodmark.controller.quorum.voter_set import (
    VoterDirectory,
    accepts,
    admission_candidate,
    merge,
)
from floodmark.errors import ErrorCode
from floodmark.storage.checkpoints import write_text_atomically
from floodmark.storage.config import LogConfig
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log

BOUND = (VoterDirectory(1, "a", 1), VoterDirectory(2, "b", 2), VoterDirectory(3, "c", 3))


def test_accepts_a_bound_voter_only_on_its_directory_and_an_unbound_one_anywhere() -> None:
    assert accepts(BOUND, 2, "b")
    assert not accepts(BOUND, 2, "b2")
    assert not accepts(BOUND, 2, "")  # a peer naming no directory is not a bound voter
    assert accepts(BOUND[:1], 2, "anything")  # a forming cluster: KIP-595's static set
    assert accepts((), 1, "")


def test_merge_keeps_the_later_binding_of_each_voter() -> None:
    rebound = VoterDirectory(2, "b2", 9)
    assert merge(BOUND, [rebound]) == (BOUND[0], rebound, BOUND[2])
    assert merge((BOUND[0], rebound, BOUND[2]), BOUND) == (BOUND[0], rebound, BOUND[2])
    assert merge((), BOUND) == BOUND


def test_admission_binds_unbound_voters_first_then_a_caught_up_new_directory() -> None:
    assert admission_candidate((), [(2, "b", 0), (1, "a", 5)], 5) == (1, "a")
    assert admission_candidate(BOUND[:2], [(3, "c", 0)], 5) == (3, "c")
    assert admission_candidate(BOUND, [(2, "b2", 4)], 5) is None  # not caught up yet
    assert admission_candidate(BOUND, [(2, "b2", 5)], 5) == (2, "b2")
    assert admission_candidate(BOUND, [(1, "a", 5), (2, "b", 5)], 5) is None
    assert admission_candidate((), [(2, "", 5)], 5) is None  # no directory named


def _core(node_id: int, directory_id: str,
          bindings: tuple[VoterDirectory, ...] = BOUND) -> tuple[QuorumCore, Log]:
    fs = MemoryFileSystem()
    fs.mkdirs("/c")
    log = Log.open("/c/log", LogConfig(), fs=fs, now_ms=0)
    core = QuorumCore(QuorumConfig(node_id, (1, 2, 3), election_timeout_ms=100),
                      ElectionState(3, -1, -1, bindings), random.Random(1), directory_id)
    core.start(log, 0)
    return core, log


def _granted(effects: list[object]) -> list[bool]:
    return [e.message.vote_granted for e in effects
            if isinstance(e, Send) and isinstance(e.message, VoteResponse)]


def test_a_voter_on_a_new_directory_neither_votes_nor_stands() -> None:
    core, log = _core(2, "b2")
    assert not core.is_voter
    for pre_vote in (True, False):
        effects = core.handle(1, VoteRequest(4, 1, 3, 10, pre_vote, "a"), log, 0)
        assert _granted(effects) == [False]
    core.role = Prospective(core.epoch, -1, -1, frozenset({2}), frozenset(), 10_000, 10_000)
    core.handle(1, VoteResponse(1, core.epoch, -1, True, True, "a"), log, 0)
    assert isinstance(core.role, Prospective)  # a majority of pre-votes, yet no candidacy


def test_votes_from_or_for_an_unknown_directory_do_not_count() -> None:
    core, log = _core(3, "c")
    effects = core.handle(2, VoteRequest(4, 2, 9, 99, False, "b2"), log, 0)
    assert _granted(effects) == [False]  # a candidate on a new directory is refused
    core.role = Candidate(core.epoch, frozenset({3}), frozenset(), 10_000, 10_000)
    core.handle(2, VoteResponse(2, core.epoch, -1, True, False, "b2"), log, 0)
    assert isinstance(core.role, Candidate) and core.role.granted == {3}
    core.handle(1, VoteResponse(1, core.epoch, -1, True, False, "a"), log, 0)
    assert core.is_leader


def test_a_follower_keeps_the_leaders_committed_bindings() -> None:
    core, log = _core(2, "b2", ())
    assert core.is_voter  # nothing bound yet
    core.handle(1, QuorumFetchResponse(ErrorCode.NONE, 4, 1, 0), log, 0)  # names the leader
    effects = core.tick(log, 0)
    fetch = next(e.message for e in effects if isinstance(e, Send))
    assert isinstance(fetch, QuorumFetchRequest) and fetch.replica_directory_id == "b2"
    effects = core.handle(1, QuorumFetchResponse(ErrorCode.NONE, 4, 1, 0, 0, 0, 0,
                                                 voter_directories=BOUND), log, 0)
    assert core.directories == BOUND and not core.is_voter
    assert core.election_state.directories == BOUND  # persisted (an effect) before more
    assert effects[0].__class__.__name__ == "PersistElectionState"


def test_directory_id_is_made_once_and_kept() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/c")
    first = load_or_format(fs, "/c")
    assert len(first) == 36 and load_or_format(fs, "/c") == first
    write_text_atomically(fs, "/c/meta.properties", "version=1\n")
    with pytest.raises(BadMetaPropertiesError):
        load_or_format(fs, "/c")


def test_bindings_survive_the_state_file_and_the_codec() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/c")
    state = QuorumStateFile(fs, "/c")
    assert state.read().directories == ()
    state.write(ElectionState(5, 1, 2, BOUND))
    assert state.read() == ElectionState(5, 1, 2, BOUND)
    for message in (VoteRequest(4, 1, 3, 10, True, "a"), VoteResponse(2, 4, -1, True, False, "b"),
                    QuorumFetchRequest(2, 4, 10, 3, 0, "b"),
                    QuorumFetchResponse(ErrorCode.NONE, 4, 1, 10, 9, voter_directories=BOUND)):
        assert decode_message(encode_message(message)) == message
    with pytest.raises(ValueError):
        decode_message({"type": "QuorumFetchResponse", "error": 0, "leader_epoch": 1,
                        "leader_id": 1, "fetch_offset": 0, "voter_directories": [[1, "a"]]})
    with pytest.raises(ValueError):
        decode_message({"type": "VoteRequest", "candidate_epoch": 1, "candidate_id": 1,
                        "last_epoch": 0, "last_epoch_end_offset": 0, "candidate_directory_id": 7})
