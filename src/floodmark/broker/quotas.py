"""Client quotas applied where the response is sent (DESIGN §security; Kafka's ClientQuotaManager
with KIP-219's channel muting).

Produce records the request's bytes, a consumer's Fetch the response's bytes, into the rate of
the entity whose quota applies (``security.quotas.QuotaStore.resolve``: Kafka's precedence; the
user is the connection's principal name, ``ANONYMOUS`` until TLS/SASL say otherwise). When the
rate is over its bound the response goes out at once with ``throttle_time_ms`` set, and the
broker reads nothing more from that connection for that long (``Connection.mute_for``); clients
that know KIP-219 (librdkafka, the Java client) also hold back on their own. Nobody else waits:
a connection's rate is shared only with the connections the same quota entity covers.

``request_percentage`` (KIP-124): the time the broker's one thread spends on a client's request
(from reading its frame to its answer, or to the point it waits: a parked Fetch or acks=all
Produce counts the work, not the wait) is recorded as a percentage of one thread per second;
over the bound, the answer carries the throttle time (the longer one when a byte-rate quota
throttled it too, as Kafka takes the max) and the connection is muted. Exempt, as in Kafka:
ApiVersions and the SASL exchange, and the brokers' own requests (replica Fetch,
WriteTxnMarkers).

Replica fetches are not counted (Kafka has separate replication quotas, not built). Produce with
acks=0 has no response: the connection is muted all the same.

``controller_mutation_rate`` (KIP-599): partitions created or deleted per second, a token bucket
per quota entity (``mutation_bucket``), applied by the CreateTopics, CreatePartitions and
DeleteTopics handlers topic by topic.

Cost when no quota is configured: one truth test of the store per Produce and Fetch.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Protocol

from floodmark.broker.boundary import Encoded
from floodmark.security import (
    KafkaPrincipal,
    QuotaStore,
    QuotaType,
    SampledRate,
    TokenBucket,
    record_and_throttle,
)
from floodmark.wire import ApiKey, peek_client_id, response_class, response_size, with_throttle_time

log = logging.getLogger(__name__)

REQUEST_QUOTA_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                  ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})
"""Requests no ``request_percentage`` counts (replica Fetch is exempt by its replica id)."""
NANOS_TO_PERCENT = 100 / 1e9
"""One thread busy for a whole second is 100 %."""
_I32 = struct.Struct(">i")

Answered = Encoded | Awaitable[Encoded | None] | None
SWEEP_INTERVAL_MS = 30_000


class Throttled(Protocol):
    """What quotas need of a connection (``server.Connection``)."""

    principal: KafkaPrincipal
    peer: str

    def mute_for(self, delay_ms: int) -> None: ...


class ClientQuotas:
    """Per-broker rates of the quota entities in force, and the throttle they call for."""

    def __init__(self, store: Callable[[], QuotaStore], now_ms: Callable[[], int],
                 samples: int, window_ms: int) -> None:
        self._store = store
        self._now_ms = now_ms
        self.samples = samples
        self.window_ms = window_ms
        self._sensors: dict[tuple[QuotaType, str, str], SampledRate] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._next_sweep_ms = 0
        self.throttled_responses = 0  # responses answered with a throttle time (for tests, metrics)

    @property
    def active(self) -> bool:
        return bool(self._store())

    def record(self, quota: QuotaType, user: str, client_id: str, value: float,
               now_ms: int, max_throttle_ms: int | None = None) -> int:
        """Record ``value`` for a connection of ``user`` / ``client_id``; the throttle time in
        ms (0: within its quota, or no quota applies), at most ``max_throttle_ms``."""
        match = self._store().resolve(quota, user, client_id)
        if match is None:
            return 0
        key = (quota, *match.tags)
        sensor = self._sensors.get(key)
        if sensor is None:
            sensor = self._sensors[key] = SampledRate(self.samples, self.window_ms)
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)
        return record_and_throttle(sensor, value, match.bound, now_ms, max_throttle_ms)

    def _sweep(self, now_ms: int) -> None:
        """Forget rates that recorded nothing for the whole window, and buckets that are full
        again (client ids come from the wire: the maps stay as small as the clients active
        lately)."""
        self._next_sweep_ms = now_ms + SWEEP_INTERVAL_MS
        for key in [k for k, s in self._sensors.items() if s.idle(now_ms)]:
            del self._sensors[key]
        for bkey in [k for k, b in self._buckets.items() if b.idle(now_ms)]:
            del self._buckets[bkey]

    # -- controller_mutation_rate (KIP-599) ------------------------------------------------------
    def mutation_bucket(self, user: str, client_id: str) -> TokenBucket | None:
        """The partition-mutation bucket of a connection of ``user`` / ``client_id``, or None
        when no ``controller_mutation_rate`` applies to it. CreateTopics (v6+), CreatePartitions
        (v3+) and DeleteTopics (v5+) refuse a topic with THROTTLING_QUOTA_EXCEEDED while the
        bucket is empty; older versions are admitted and only throttled (Kafka's strict and
        permissive quotas)."""
        match = self._store().resolve(QuotaType.CONTROLLER_MUTATION, user, client_id)
        if match is None:
            return None
        now_ms = self._now_ms()
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)
        burst = match.bound * self.samples * self.window_ms / 1000.0
        bucket = self._buckets.get(match.tags)
        if bucket is None:
            bucket = self._buckets[match.tags] = TokenBucket(match.bound, burst, now_ms)
        else:  # the quota may have been altered since
            bucket.rate, bucket.burst = match.bound, burst
        return bucket

    def mutation_throttled(self, bucket: TokenBucket | None, conn: Throttled | None) -> int:
        """After a mutation request: the throttle time its answer carries (0 when the bucket
        is not below zero); the connection is muted that long (KIP-219)."""
        if bucket is None:
            return 0
        throttle_ms = bucket.throttle_ms(self._now_ms())
        if throttle_ms > 0:
            self.throttled_responses += 1
            if conn is not None:
                conn.mute_for(throttle_ms)
        return throttle_ms

    # -- the dispatch hooks ------------------------------------------------------------------------
    def produce_answered(self, frame: memoryview | bytes, version: int, conn: Throttled,
                         answer: Answered) -> Answered:
        """A Produce was handled: once its answer is ready, record the request's bytes."""
        client_id = peek_client_id(frame)
        size = len(frame)
        if answer is None or isinstance(answer, list):
            return self._apply(ApiKey.PRODUCE, QuotaType.PRODUCE, version, conn, client_id,
                               size, answer)
        return self._later(ApiKey.PRODUCE, QuotaType.PRODUCE, version, conn, client_id, size,
                           answer)

    def fetch_answered(self, version: int, client_id: str, conn: Throttled,
                       answer: Answered) -> Answered:
        """A consumer's Fetch was handled: once its answer is ready, record the response's
        bytes."""
        if answer is None or isinstance(answer, list):
            return self._apply(ApiKey.FETCH, QuotaType.FETCH, version, conn, client_id, None,
                               answer)
        return self._later(ApiKey.FETCH, QuotaType.FETCH, version, conn, client_id, None, answer)

    async def _later(self, api_key: ApiKey, quota: QuotaType, version: int, conn: Throttled,
                     client_id: str, size: int | None, pending: Awaitable[Encoded | None]
                     ) -> Encoded | None:
        answer = self._apply(api_key, quota, version, conn, client_id, size, await pending)
        assert answer is None or isinstance(answer, list)
        return answer

    def _apply(self, api_key: ApiKey, quota: QuotaType, version: int, conn: Throttled,
               client_id: str, size: int | None, answer: Encoded | None) -> Encoded | None:
        if size is None:
            if answer is None:
                return None
            size = response_size(answer)
        throttle_ms = self.record(quota, conn.principal.name, client_id, size, self._now_ms())
        if throttle_ms <= 0:
            return answer
        self.throttled_responses += 1
        if answer is not None:
            with_throttle_time(api_key, version, answer, throttle_ms)
        conn.mute_for(throttle_ms)
        return answer

    # -- request_percentage ------------------------------------------------------------------
    def request_answered(self, api_key: int, version: int, client_id: str, conn: Throttled,
                         answer: Answered, elapsed_ns: int) -> Answered:
        """A client's request took ``elapsed_ns`` of the broker's thread: record it; over the
        bound, the answer (now, or when it is ready) carries the throttle time."""
        if api_key in REQUEST_QUOTA_EXEMPT:
            return answer
        throttle_ms = self.record(QuotaType.REQUEST, conn.principal.name, client_id,
                                  elapsed_ns * NANOS_TO_PERCENT, self._now_ms(),
                                  max_throttle_ms=self.window_ms)  # Kafka: one window at most
        if throttle_ms <= 0:
            return answer
        self.throttled_responses += 1
        conn.mute_for(throttle_ms)
        if answer is None or isinstance(answer, list):
            if answer is not None:
                raise_throttle_time(api_key, version, answer, throttle_ms)
            return answer
        return self._throttle_later(api_key, version, answer, throttle_ms)

    @staticmethod
    async def _throttle_later(api_key: int, version: int, pending: Awaitable[Encoded | None],
                              throttle_ms: int) -> Encoded | None:
        answer = await pending
        if answer is not None:
            raise_throttle_time(api_key, version, answer, throttle_ms)
        return answer


def throttle_time_offset(api_key: int, version: int) -> int | None:
    """Where ``throttle_time_ms`` sits in an encoded response (size prefix included), or None
    where the response has none at a fixed place (ApiVersions keeps it after its list)."""
    if api_key == ApiKey.FETCH:
        return 9 if version >= 12 else 8
    if api_key == ApiKey.PRODUCE:
        return None  # after the topics: counted from the end
    cls = response_class(api_key, version)
    if fields(cls)[0].name != "throttle_time":
        return None
    flexible = getattr(cls.__header_schema__, "__version__", 0) >= 1
    return 8 + (1 if flexible else 0)  # size, correlation id, the header's tagged fields


def raise_throttle_time(api_key: int, version: int, parts: Encoded, throttle_ms: int) -> None:
    """Make an encoded response's ``throttle_time_ms`` at least ``throttle_ms``, in place (a
    response a byte-rate quota throttled already keeps the longer of the two). A Fetch answer's
    first buffer holds its header and the field (its records may be file slices); other
    answers are joined into one buffer first."""
    if api_key == ApiKey.FETCH:
        index, offset = 0, 9 if version >= 12 else 8
    else:
        parts[:] = [b"".join(parts)]  # type: ignore[arg-type]  # no file slices outside Fetch
        index = 0
        found = (len(parts[0]) - (5 if version >= 9 else 4) if api_key == ApiKey.PRODUCE
                 else throttle_time_offset(api_key, version))
        if found is None:
            return
        offset = found
    buffer = parts[index]
    if not isinstance(buffer, (bytes, bytearray, memoryview)) or len(buffer) < offset + 4:
        return
    if _I32.unpack_from(buffer, offset)[0] >= throttle_ms:
        return
    out = bytearray(buffer)
    _I32.pack_into(out, offset, throttle_ms)
    parts[index] = bytes(out)
