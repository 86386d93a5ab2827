"""The follower's fetch loop in the replication node (issue 25 §1, ``replication.fetcher``):
what a follower sends its leader and when, the one loop the broker's ``ReplicaFetcher`` and the
simulator's broker drive. A real leader and follower (``Partition`` + ``ReplicaDriver`` over
real storage on the memory file system); the requests are carried by hand."""

from __future__ import annotations

from collections.abc import Callable

from floodmark.errors import ErrorCode
from floodmark.records import simple_batch
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.election import PartitionRegistration
from floodmark.replication.fetcher import APPEND_REJECTED, FetchLoop, FetchToSend
from floodmark.replication.partition import (
    FetchResponse,
    FollowerActionKind,
    FollowerFetch,
    Partition,
    PartitionConfig,
)
from floodmark.replication.produce import ProduceSettings, produce_as_leader
from floodmark.storage.fs import MemoryFileSystem
from floodmark.storage.log import Log

TIMEOUT_MS = 1000
BACKOFF_MS = 100


class Replica:
    """Broker ``broker_id`` hosting t-0; every port does nothing (``__getattr__``)."""

    def __init__(self, broker_id: int) -> None:
        fs = MemoryFileSystem()
        fs.mkdirs("/d/t-0")
        self.log = Log.open("/d/t-0", fs=fs, now_ms=0)
        self.core = Partition(PartitionConfig("t", 0, broker_id, min_insync_replicas=1))
        self.driver = ReplicaDriver(self.core, self.log, self)

    def __getattr__(self, port: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None

    def metadata(self, leader: int, epoch: int) -> None:
        self.driver.apply(self.core.apply_metadata(
            self.log, PartitionRegistration((1, 2), (1, 2), leader, epoch, epoch), 0))


def pair(epoch: int = 3) -> tuple[Replica, Replica, FetchLoop]:
    leader, follower = Replica(1), Replica(2)
    leader.metadata(1, epoch)
    follower.metadata(1, epoch)
    loop = FetchLoop(follower.driver, request_timeout_ms=TIMEOUT_MS, backoff_ms=BACKOFF_MS)
    return leader, follower, loop


def answer(leader: Replica, out: FetchToSend, now_ms: int) -> tuple[FetchResponse, bytes]:
    assert isinstance(out.request, FollowerFetch)
    fetched = leader.driver.answer_follower_fetch(
        out.request, now_ms, lambda a, b: bytes(leader.log.read(a, 1 << 20, b).records))
    return fetched.response, bytes(fetched.records)


def produce(leader: Replica, value: bytes) -> None:
    out = produce_as_leader(leader.core, leader.log, simple_batch([value]), acks=1,
                            produce_id=-1, now_ms=0, timeout_ms=1000,
                            settings=ProduceSettings(), leadership_in_doubt=False,
                            stepped_down=False)
    leader.driver.apply(out.effects)


def test_nothing_is_sent_before_metadata_names_a_leader() -> None:
    _leader, _follower, loop = pair()
    assert loop.poll(0) is None and loop.next_deadline_ms() is None
    assert loop.on_metadata(0) is True  # the metadata's leader and epoch: follow them
    out = loop.poll(0)
    assert out is not None and out.leader_id == 1
    assert loop.poll(0) is None, "one request in flight at a time"
    assert loop.next_deadline_ms() == TIMEOUT_MS


def first_fetch(leader: Replica, loop: FetchLoop) -> tuple[FetchToSend, FetchResponse, bytes]:
    """One record at the leader; the loop's first fetch, and the leader's answer at 10 ms."""
    produce(leader, b"a")
    loop.on_metadata(0)
    out = loop.poll(0)
    assert out is not None
    return (out, *answer(leader, out, 10))


def test_an_answer_is_carried_out_and_the_next_fetch_goes_at_once() -> None:
    leader, follower, loop = pair()
    out, response, records = first_fetch(leader, loop)
    action = loop.on_fetch_answer(out.session, response, records, 10)
    assert action is not None and action.kind is FollowerActionKind.APPEND
    assert follower.log.log_end_offset == 1
    assert loop.next_deadline_ms() == 10
    nxt = loop.poll(10)
    assert nxt is not None and isinstance(nxt.request, FollowerFetch)
    assert nxt.request.fetch_offset == 1 and nxt.session != out.session


def test_a_late_or_stale_answer_is_dropped_before_the_core_sees_it() -> None:
    leader, follower, loop = pair()
    out, response, records = first_fetch(leader, loop)
    loop.tick(TIMEOUT_MS - 1)
    assert loop.inflight, "not yet timed out"
    loop.tick(TIMEOUT_MS)  # given up: due again at once
    assert not loop.inflight and loop.next_deadline_ms() == TIMEOUT_MS
    assert loop.on_fetch_answer(out.session, response, records, TIMEOUT_MS) is None
    assert follower.log.log_end_offset == 0
    again = loop.poll(TIMEOUT_MS)
    assert again is not None and again.session != out.session
    assert loop.on_fetch_answer(out.session, response, records, TIMEOUT_MS) is None


def test_new_leader_epoch_drops_the_request_in_flight_and_starts_over() -> None:
    leader, follower, loop = pair()
    loop.on_metadata(0)
    out = loop.poll(0)
    assert out is not None
    follower.metadata(1, 4)
    leader.metadata(1, 4)
    assert loop.on_metadata(5) is True and loop.target == (1, 4)
    assert not loop.inflight and loop.next_deadline_ms() == 5
    response, records = answer(leader, out, 6)
    assert loop.on_fetch_answer(out.session, response, records, 6) is None
    assert loop.on_metadata(7) is False, "the same leader and epoch: nothing changes"


def test_an_error_backs_off_and_fenced_waits_for_new_metadata() -> None:
    _leader, follower, loop = pair()
    loop.on_metadata(0)
    out = loop.poll(0)
    assert out is not None
    refused = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 3, -1, 0, 0)
    action = loop.on_fetch_answer(out.session, refused, b"", 20)
    assert action is not None and action.kind is FollowerActionKind.RETRY
    assert loop.poll(20 + BACKOFF_MS - 1) is None
    out = loop.poll(20 + BACKOFF_MS)
    assert out is not None
    fenced = FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, -1, 0, 0)
    action = loop.on_fetch_answer(out.session, fenced, b"", 200)
    assert action is not None and action.kind is FollowerActionKind.STOP
    assert loop.next_deadline_ms() is None and loop.poll(10_000) is None
    follower.metadata(1, 4)  # the next metadata restarts fetching
    assert loop.on_metadata(300) is True
    assert loop.poll(300) is not None


def test_records_the_log_refuses_are_a_retry_after_the_backoff() -> None:
    _leader, follower, loop = pair()
    loop.on_metadata(0)
    out = loop.poll(0)
    assert out is not None
    ok = FetchResponse(ErrorCode.NONE, 3, 0, 0, 1, has_records=True, fetch_offset=0)
    action = loop.on_fetch_answer(out.session, ok, b"not a record batch at all", 30)
    assert action is not None and action.kind is FollowerActionKind.RETRY
    assert action.reason.startswith(APPEND_REJECTED)
    assert follower.log.log_end_offset == 0 and loop.next_deadline_ms() == 30 + BACKOFF_MS


def test_a_failed_request_backs_off_and_the_idle_loop_looks_again() -> None:
    _leader, follower, loop = pair()
    loop.on_metadata(0)
    out = loop.poll(0)
    assert out is not None
    loop.request_failed(out.session, 40)
    assert loop.next_deadline_ms() == 40 + BACKOFF_MS
    # A loop with an idle retry looks again on its own when there is nothing to fetch.
    idle = FetchLoop(follower.driver, request_timeout_ms=None, backoff_ms=BACKOFF_MS,
                     idle_retry_ms=1000)
    follower.metadata(-1, 4)  # no leader
    assert idle.poll(0, force=True) is None and idle.next_deadline_ms() == 1000
    untimed = FetchLoop(follower.driver, request_timeout_ms=None, backoff_ms=BACKOFF_MS)
    follower.metadata(1, 5)
    untimed.on_metadata(0)
    assert untimed.poll(0) is not None and untimed.next_deadline_ms() is None
