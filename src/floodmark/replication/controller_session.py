"""Whether a broker may still trust that it leads what its metadata says it leads, sans-I/O.

A broker learns that it lost leadership only from the metadata log. Cut off from the controller,
it keeps its last image: the controller meanwhile fences it (no heartbeat for
``broker.session.timeout.ms``) and moves its partitions to other brokers, and idempotent
producers write their next sequences there. A client that still reaches the cut-off broker, or
that follows its stale Metadata claim after a heal (librdkafka forgets a partition's cached
leader epoch when the leader it knew goes away), sends it the sequence after those: the stale
leader's producer state ends earlier, so its own sequence check says OUT_OF_ORDER_SEQUENCE_NUMBER,
which librdkafka and kafka-python treat as fatal for an idempotent producer.

Kafka answers the same there: its broker ignores ``isFenced`` in heartbeat answers while
RUNNING (``BrokerLifecycleManager``) and answers as leader until it applies the metadata that
moves the partition; only then NOT_LEADER_OR_FOLLOWER. The sequence error is wrong all the same:
it tells the producer "I lead and you skipped sequences", and this broker cannot know that it
leads. So while the leadership is **in doubt** the produce path turns a sequence gap into
NOT_LEADER_OR_FOLLOWER (retriable: the client refreshes its metadata and retries the same
sequences at the real leader). Every other answer is unchanged, so a cluster whose controllers
are all down keeps serving on the metadata it has, as Kafka's does.

In doubt:

* the session lapsed: ``broker.session.timeout.ms`` (the controller's value, told in its answers)
  has passed since the last heartbeat the controller answered was *sent*. The controller received
  it after that, so the broker is in doubt no later than the controller can fence it (a lease
  counted from the request, as leases are);
* or, after a lapse or a STALE_BROKER_EPOCH answer, the metadata image has not yet reached the
  controller's metadata end offset given in that answer: changes made while this broker was
  fenced are still unknown to it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SESSION_TIMEOUT_MS = 9000  # Kafka's broker.session.timeout.ms, until the controller says


@dataclass(slots=True)
class ControllerSession:
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    last_answered_ms: int | None = None
    """When the last heartbeat (or registration) the controller answered with NONE was sent
    (None: not registered yet)."""
    resync_to: int = 0
    """A metadata offset the image must reach before its leadership can be trusted again."""

    def registered(self, sent_ms: int, session_timeout_ms: int | None = None) -> None:
        """A registration sent at ``sent_ms`` was answered: a new session starts, as long as
        the controller says (its answer carries ``broker.session.timeout.ms``: a broker cut off
        before its first heartbeat is answered must not count on the default)."""
        if session_timeout_ms is not None and session_timeout_ms > 0:
            self.session_timeout_ms = session_timeout_ms
        self.last_answered_ms = sent_ms

    def heartbeat_answered(self, sent_ms: int, answered_ms: int, *, stale_epoch: bool,
                           metadata_end: int, session_timeout_ms: int | None = None) -> bool:
        """The controller answered at ``answered_ms`` a heartbeat sent at ``sent_ms``. Returns
        True when the answer ends a lapse (the broker was in doubt at some moment before it) or
        says the session is gone: the caller should fetch metadata at once."""
        if session_timeout_ms is not None and session_timeout_ms > 0:
            self.session_timeout_ms = session_timeout_ms
        if stale_epoch:
            self.resync_to = max(self.resync_to, metadata_end)
            return True
        lapsed = self.lapsed(answered_ms)
        if lapsed:
            self.resync_to = max(self.resync_to, metadata_end)
        self.last_answered_ms = max(self.last_answered_ms or sent_ms, sent_ms)
        return lapsed

    def lapsed(self, now_ms: int) -> bool:
        return (self.last_answered_ms is not None
                and now_ms - self.last_answered_ms > self.session_timeout_ms)

    def leadership_in_doubt(self, now_ms: int, metadata_offset: int) -> bool:
        """``metadata_offset``: the image's next offset (everything below it is applied)."""
        return self.lapsed(now_ms) or metadata_offset < self.resync_to
