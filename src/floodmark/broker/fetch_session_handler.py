"""A follower's side of an incremental fetch session (KIP-227), sans-I/O: Kafka's
``FetchSessionHandler``, the rules a replica fetcher follows to name only what changed.

The leader's side is ``fetch_sessions`` (the session cache a consumer's sessions use too). One
handler per fetcher (one leader, one connection), one request in flight at a time:

==============================  =============================================================
state before the request         what ``build`` sends
==============================  =============================================================
no session (id 0, epoch 0)       a full fetch of every partition wanted, asking for a session
session ``id``, epoch ``n``      incremental: only the partitions added since the last request
                                 or whose fetch data changed (fetch offset, leader epoch, last
                                 fetched epoch, log start offset, max bytes); those no longer
                                 wanted (moved away, backing off) in ``forgotten_topics_data``
==============================  =============================================================

What the answer makes of the next request (``handle_response``, ``handle_error``):

* a full answer with a session id: incremental from epoch 1 on; with id 0 (the leader's cache
  has no slot): full again, asking again;
* an incremental answer: the next epoch; it names only the partitions the leader had something
  for (records, a new high watermark or log start offset, an error, a diverging epoch), the
  others' fetch offsets are the session's and nothing changed for them;
* FETCH_SESSION_ID_NOT_FOUND (the leader restarted or evicted it): full, no session;
* any other error, an answer naming a partition outside the request (full) or the session
  (incremental), or no answer at all (the connection failed): full, asking the leader to drop
  the old session (its id with epoch 0), since the leader may or may not have moved its epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from floodmark.broker.fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from floodmark.errors import ErrorCode
from floodmark.wire import ReplicaFetchPartition

SessionKey = tuple[uuid.UUID, int]
"""(topic id, partition)."""


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What one Fetch carries for its session: its id and epoch, the partitions to name, grouped
    by topic in first-seen order, and the ones to forget."""

    session_id: int
    session_epoch: int
    full: bool
    to_send: list[tuple[uuid.UUID, list[ReplicaFetchPartition]]]
    forgotten: list[tuple[uuid.UUID, list[int]]]


def _by_topic(entries: Iterable[tuple[SessionKey, ReplicaFetchPartition]]
              ) -> list[tuple[uuid.UUID, list[ReplicaFetchPartition]]]:
    grouped: dict[uuid.UUID, list[ReplicaFetchPartition]] = {}
    for (topic_id, _), data in entries:
        grouped.setdefault(topic_id, []).append(data)
    return list(grouped.items())


class FetchSessionHandler:
    """The session a follower keeps with one leader (module docstring)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[SessionKey, ReplicaFetchPartition] = {}
        """The fetch data the leader holds for each partition of the session, once the request
        built last is answered (what an incremental request compares against)."""
        self._requested: frozenset[SessionKey] = frozenset()
        self._full = True

    @property
    def is_full_next(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, wanted: Mapping[SessionKey, ReplicaFetchPartition]) -> SessionRequest:
        """The next request's session part, for the partitions ``wanted`` now (each with the
        fetch data it would send), in ``wanted``'s order."""
        self._full = self.is_full_next
        if self._full:
            self.partitions = dict(wanted)
            self._requested = frozenset(wanted)
            return SessionRequest(self.session_id, self.epoch, True,
                                  _by_topic(wanted.items()), [])
        changed: list[tuple[SessionKey, ReplicaFetchPartition]] = []
        forgotten: dict[uuid.UUID, list[int]] = {}
        for key in self.partitions:
            if key not in wanted:
                forgotten.setdefault(key[0], []).append(key[1])
        for key, data in wanted.items():
            if self.partitions.get(key) != data:  # added, or its fetch data changed
                changed.append((key, data))
        self.partitions = dict(wanted)
        self._requested = frozenset(key for key, _ in changed)
        return SessionRequest(self.session_id, self.epoch, False, _by_topic(changed),
                              list(forgotten.items()))

    def handle_response(self, error: ErrorCode, session_id: int,
                        answered: Iterable[SessionKey]) -> bool:
        """The answer to the request built last: True when its partitions' answers can be used
        (then, for an incremental answer, every partition of the session it does not name had
        nothing new); the session's next state either way (module docstring)."""
        if error is not ErrorCode.NONE:
            if error is ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._reset(INVALID_SESSION_ID)
            else:
                self._reset(self.session_id)
            return False
        allowed = self._requested if self._full else self.partitions.keys()
        answered_keys = set(answered)
        if not answered_keys <= allowed or (self._full and answered_keys != self._requested):
            # Kafka's verifyFull/IncrementalFetchResponsePartitions: this answer does not fit
            # the session as the follower knows it; start over.
            self._reset(INVALID_SESSION_ID if self._full else self.session_id)
            return False
        if session_id == INVALID_SESSION_ID:
            self._reset(INVALID_SESSION_ID)  # no session (the leader's cache is full), or closed
        elif self._full:
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The request got no answer (the connection failed or timed out): the leader may or may
        not have taken it, so the next request starts the session over."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        """Full next time: ``session_id`` 0 for a new session, or the old id with epoch 0,
        which asks the leader to drop that session and start a new one."""
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
