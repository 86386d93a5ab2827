"""A follower's fetch loop, sans-I/O: what to send its leader next, and when.

The follower's rules live in the core (``Partition.next_fetch`` builds the request,
``Partition.on_fetch_response`` / ``on_epoch_answer`` decide what an answer means) and the
driver carries them out (``ReplicaDriver``). Around them sits a loop that both the broker's
``ReplicaFetcherThread`` and the simulator's broker used to write out themselves, with their own
timers: follow the leader and epoch the metadata names (a new one drops the request in flight:
its answer is ignored), one request in flight at a time, give it up after a timeout, fetch again
at once, after ``replica.fetch.backoff.ms``, or when new metadata comes (``FollowerAction.
next_fetch``). That loop is ``FetchLoop``, in the shape of ``controller/quorum``'s core: inputs
with ``now_ms``, what to send as a value (``poll``), timers through ``next_deadline_ms()`` /
``tick(now_ms)``. The runner only moves the request and its answer over its network.

A request is named by its ``session`` (one number per request sent): an answer for another
session, or one that comes after the request was given up, is dropped here, before the core
sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.errors import ErrorCode, KafkaError
from floodmark.replication.driver import ReplicaDriver
from floodmark.replication.epochs import EpochEndOffset
from floodmark.replication.partition import (
    EpochQuery,
    FetchResponse,
    FollowerAction,
    FollowerActionKind,
    FollowerFetch,
    FollowerState,
    NextFetch,
)

APPEND_REJECTED = "follower append rejected"
"""The reason of the RETRY an answer whose records the log refused becomes."""


@dataclass(frozen=True, slots=True)
class FetchToSend:
    """A request for the runner to send to broker ``leader_id``; its answer comes back with
    ``session``."""

    session: int
    leader_id: int
    request: FollowerFetch | EpochQuery


@dataclass(eq=False, slots=True)
class FetchLoop:
    """One followed partition's fetch loop over its ``ReplicaDriver``.

    ``request_timeout_ms``: a request unanswered for this long is given up and sent again
    (None: never; a scripted world answers or drops requests by hand). ``backoff_ms``:
    ``replica.fetch.backoff.ms``. ``idle_retry_ms``: when there is nothing to fetch (no leader
    yet) or fetching stopped until new metadata, look again after this long anyway (None: only
    on new metadata)."""

    driver: ReplicaDriver
    request_timeout_ms: int | None
    backoff_ms: int
    idle_retry_ms: int | None = None
    target: tuple[int, int] = (-1, -1)
    """(leader id, leader epoch) being followed."""
    session: int = 0
    inflight: bool = False
    inflight_deadline_ms: int | None = None
    due_ms: int | None = None
    """When the next request goes out (None: on new metadata, or ``idle_retry_ms``)."""
    stopped: bool = False
    """The last answer said: wait for new metadata (``NextFetch.ON_NEW_METADATA``)."""

    # -- inputs ----------------------------------------------------------------------------------
    def on_metadata(self, now_ms: int) -> bool:
        """New metadata was applied to the partition. A follower of another leader or epoch
        than the one followed starts over against it, at once (True); a loop that stopped
        until new metadata fetches again."""
        partition = self.driver.partition
        if not isinstance(partition.role, FollowerState):
            return False
        target = (partition.leader_id, partition.leader_epoch)
        if target != self.target:
            self.target = target
            self.session += 1  # the request in flight to the old target is dropped
            self.inflight = False
            self.inflight_deadline_ms = None
            self.stopped = False
            self.due_ms = now_ms
            return True
        if self.stopped and not self.inflight:
            self.stopped = False
            self.due_ms = now_ms
        return False

    def poll(self, now_ms: int, *, force: bool = False) -> FetchToSend | None:
        """The request to send now, if one is due (``force``: whether due or not, as a
        scripted step sends it); None while one is in flight or none is due."""
        if self.inflight or not (force or (self.due_ms is not None and now_ms >= self.due_ms)):
            return None
        partition = self.driver.partition
        request = partition.next_fetch(self.driver.log)
        if request is None or partition.leader_id < 0:
            self.due_ms = self._idle(now_ms)
            return None
        self.session += 1
        self.inflight = True
        self.inflight_deadline_ms = (None if self.request_timeout_ms is None
                                     else now_ms + self.request_timeout_ms)
        self.due_ms = None
        return FetchToSend(self.session, partition.leader_id, request)

    def on_fetch_answer(self, session: int, response: FetchResponse,
                        records: bytes | bytearray | memoryview,
                        now_ms: int) -> FollowerAction | None:
        """The leader's answer to request ``session``, carried out (``ReplicaDriver.
        on_fetch_response``); None when it answers a request given up or superseded. Records
        the log refuses (``KafkaError``) are a RETRY after the backoff, with the error as the
        reason."""
        if not self._answers(session):
            return None
        try:
            action = self.driver.on_fetch_response(response, records, now_ms)
        except KafkaError as exc:
            action = FollowerAction(FollowerActionKind.RETRY, backoff=True,
                                    reason=f"{APPEND_REJECTED}: {exc}")
        self._next(action, now_ms)
        return action

    def on_epoch_answer(self, session: int, request_leader_epoch: int, error: ErrorCode,
                        answer: EpochEndOffset, now_ms: int) -> FollowerAction | None:
        """The leader's OffsetsForLeaderEpoch answer to request ``session`` (epoch-offset
        mode), carried out; None when stale."""
        if not self._answers(session):
            return None
        action = self.driver.on_epoch_answer(request_leader_epoch, error, answer)
        self._next(action, now_ms)
        return action

    def on_no_news(self, session: int, now_ms: int) -> None:
        """Request ``session`` was answered with nothing for this partition: an incremental
        fetch session's answer (KIP-227) leaves out a partition without records, error or a
        new high watermark or log start offset, so there is nothing for the core to learn.
        Fetch again at once, as after an empty answer."""
        if self._answers(session):
            self.due_ms = now_ms

    def request_failed(self, session: int, now_ms: int) -> None:
        """Request ``session`` got no usable answer (the connection failed, the leader could
        not be reached): try again after the backoff."""
        if self._answers(session):
            self.due_ms = now_ms + self.backoff_ms

    # -- timers ---------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        """When ``tick`` or ``poll`` has something to do (None: not until an input)."""
        if self.inflight:
            return self.inflight_deadline_ms
        return self.due_ms

    def tick(self, now_ms: int) -> None:
        """A request unanswered past its timeout is given up, and the next one is due at
        once (its late answer is dropped). The runner then calls ``poll``."""
        if (self.inflight and self.inflight_deadline_ms is not None
                and now_ms >= self.inflight_deadline_ms):
            self.inflight = False
            self.inflight_deadline_ms = None
            self.due_ms = now_ms

    # -- rules -------------------------------------------------------------------------------------
    def _answers(self, session: int) -> bool:
        if session != self.session or not self.inflight:
            return False
        self.inflight = False
        self.inflight_deadline_ms = None
        return True

    def _next(self, action: FollowerAction, now_ms: int) -> None:
        """Fetch again as the answer's action says (``FollowerAction.next_fetch``)."""
        after = action.next_fetch
        self.stopped = after is NextFetch.ON_NEW_METADATA
        if self.stopped:
            self.due_ms = self._idle(now_ms)
        elif after is NextFetch.AFTER_BACKOFF:
            self.due_ms = now_ms + self.backoff_ms
        else:
            self.due_ms = now_ms

    def _idle(self, now_ms: int) -> int | None:
        return None if self.idle_retry_ms is None else now_ms + self.idle_retry_ms
