"""Client quotas as Kafka defines them (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546), as pure values
and rules; the broker applies them where the response is sent (``broker/quotas.py``).

- **Entities**: ``user``, ``client-id``, or a (user, client-id) pair; a name of None is the
  entity type's *default* (``--user-default``, ``--client-default``). ``QuotaEntity`` holds the
  pairs sorted by type, so one entity has one spelling.
- **Keys** (``QuotaType``): ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes per second,
  Kafka's LONG: whole numbers), ``request_percentage`` (percent of one request thread per second),
  ``controller_mutation_rate`` (partition mutations per second, a ``TokenBucket``); the broker
  applies all four (``broker/quotas.py``, the topic-mutation handlers).
  Every value must be > 0 (Kafka's "Quota <key> must be greater than 0").
- **Precedence** (``QuotaStore.resolve``): for a connection of user ``u`` and client id ``c``, the
  first of these entities that sets the key wins, one key at a time:
  ``(u, c)``, ``(u, default c)``, ``u``, ``(default u, c)``, ``(default u, default c)``,
  ``default u``, ``c``, ``default c``. The winner also says who shares one rate: a quota set on a
  user (or on the default user) is one rate for all that user's client ids; one set on a client id
  is one rate per client id across users. ``QuotaMatch.tags`` is that sharing key, as Kafka's
  ``quotaMetricTags`` (user, client-id; "" where the winner has no such entity).
- **Rate** (``SampledRate``): Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num``
  samples of ``quota.window.size.seconds`` each; a sample opens at the first record after the
  previous one closed; samples older than the whole window are forgotten; the rate's window is
  the time since the oldest kept sample, padded to ``num - 1`` full windows so a young sensor is
  not over-measured.
- **Throttle time** (``throttle_time_ms``): after recording a response's bytes, if the measured
  rate ``O`` is above the bound ``T`` over window ``W``, the client waits ``X`` with
  ``O * W / (W + X) = T``, i.e. ``X = (O - T) / T * W`` (rounded), never negative. A rate at the
  bound is not over it.

Time is always passed in (``now_ms``); nothing here reads a clock.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from floodmark.errors import FloodmarkError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)
"""The entity types floodmark stores (``ip``, for connection_creation_rate, is not one)."""

QUOTA_WINDOW_NUM_DEFAULT = 11
QUOTA_WINDOW_SIZE_SECONDS_DEFAULT = 1
LONG_MAX = 9_223_372_036_854_775_807


class QuotaError(FloodmarkError, ValueError):
    """An entity, filter, key or value Kafka refuses (INVALID_REQUEST), with Kafka's message."""


class QuotaType(enum.Enum):
    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"
    CONTROLLER_MUTATION = "controller_mutation_rate"


WHOLE_NUMBER_KEYS = frozenset({QuotaType.PRODUCE.value, QuotaType.FETCH.value})
QUOTA_KEYS = frozenset(q.value for q in QuotaType)


# -- entities ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """(type, name or None for the default) pairs, sorted by type, each type at most once."""

    parts: tuple[tuple[str, str | None], ...]

    def has(self, entity_type: str) -> bool:
        return any(t == entity_type for t, _ in self.parts)

    def name(self, entity_type: str) -> str | None:
        for t, n in self.parts:
            if t == entity_type:
                return n
        return None

    def types(self) -> frozenset[str]:
        return frozenset(t for t, _ in self.parts)

    def __str__(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in self.parts)


def entity(user: str | bool | None = False, client_id: str | bool | None = False) -> QuotaEntity:
    """An entity of a user and/or a client id: pass a name, None for the default, or leave the
    argument out (False) when the entity has no such part."""
    parts: list[tuple[str, str | None]] = []
    if user is not False:
        parts.append((USER, None if user is None or user is True else user))
    if client_id is not False:
        parts.append((CLIENT_ID, None if client_id is None or client_id is True else client_id))
    return QuotaEntity(tuple(sorted(parts, key=lambda p: p[0])))


def new_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """Validate (type, name) pairs as AlterClientQuotas sends them. Raises QuotaError."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise QuotaError(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type == IP:
            raise QuotaError("ip quota entities (connection_creation_rate) are not supported")
        if entity_type not in ENTITY_TYPES:
            raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaError(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if not seen:
        raise QuotaError("Invalid empty client quota entity")
    return QuotaEntity(tuple(sorted(seen.items(), key=lambda p: p[0])))


def validate_quota(key: str, value: float) -> float:
    """A quota value as AlterClientQuotas sets it (Kafka's rules and messages). Raises
    QuotaError."""
    if key not in QUOTA_KEYS:
        raise QuotaError(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if key in WHOLE_NUMBER_KEYS:
        if value > LONG_MAX:
            raise QuotaError(f"Proposed value for {key} is too large for a LONG.")
        if abs(value - round(value)) > 1e-6:
            raise QuotaError(f"{key} cannot be a fractional value.")
    return float(value)


QuotaChanges = dict[str, float | None]
"""Key -> the value to set, or None to remove it (one AlterClientQuotas entry's ops)."""


def new_alteration(pairs: Iterable[tuple[str, str | None]],
                   ops: Iterable[tuple[str, float, bool]]) -> tuple[QuotaEntity, QuotaChanges]:
    """One AlterClientQuotas entry (entity pairs; (key, value, remove) ops), validated as a
    whole: any bad part refuses the entry. Raises QuotaError."""
    e = new_entity(pairs)
    changes: QuotaChanges = {}
    for key, value, remove in ops:
        if key in changes:
            raise QuotaError(f"Duplicate quota key {key} for entity {e}")
        if remove:
            if key not in QUOTA_KEYS:
                raise QuotaError(f"Invalid configuration key {key}")
            changes[key] = None
        else:
            changes[key] = validate_quota(key, value)
    return e, changes


# -- describe filters (DescribeClientQuotas) ----------------------------------------------------
class MatchType(enum.IntEnum):
    EXACT = 0
    DEFAULT = 1
    ANY = 2  # any specified name, the default included


@dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: MatchType
    match: str | None = None

    def matches(self, e: QuotaEntity) -> bool:
        if not e.has(self.entity_type):
            return False
        name = e.name(self.entity_type)
        if self.match_type is MatchType.EXACT:
            return name == self.match
        if self.match_type is MatchType.DEFAULT:
            return name is None
        return True


def new_quota_filter(components: Iterable[tuple[str, int, str | None]]) -> list[FilterComponent]:
    """Validate DescribeClientQuotas filter components. Raises QuotaError."""
    out: list[FilterComponent] = []
    seen: set[str] = set()
    for entity_type, match_type, match in components:
        if entity_type in seen:
            raise QuotaError(f"Entity type {entity_type} cannot appear more than once in the "
                             "filter")
        seen.add(entity_type)
        if entity_type not in (*ENTITY_TYPES, IP):
            raise QuotaError(f"Custom entity type {entity_type!r} not supported")
        try:
            kind = MatchType(match_type)
        except ValueError:
            raise QuotaError(f"Unknown match type {match_type}") from None
        if kind is MatchType.EXACT and match is None:
            raise QuotaError(f"Exact match of {entity_type} without a name")
        out.append(FilterComponent(entity_type, kind, match if kind is MatchType.EXACT else None))
    return out


def filter_matches(components: list[FilterComponent], strict: bool, e: QuotaEntity) -> bool:
    """Every component matches, and with ``strict`` the entity has no other types."""
    if strict and e.types() != {c.entity_type for c in components}:
        return False
    return all(c.matches(e) for c in components)


# -- the store and precedence --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QuotaMatch:
    """The quota in force for one connection and key: its bound and who shares its rate
    (``tags``: user tag, client-id tag; Kafka's quotaMetricTags)."""

    bound: float
    tags: tuple[str, str]
    entity: QuotaEntity


def precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """The entities that may hold a connection's quota, first wins, each with the sharing key
    its quota gives (Kafka's order: KIP-55, "Quota precedence")."""
    return [
        (entity(user, client_id), (user, client_id)),
        (entity(user, None), (user, client_id)),
        (entity(user), (user, "")),
        (entity(None, client_id), (user, client_id)),
        (entity(None, None), (user, client_id)),
        (entity(None), (user, "")),
        (entity(client_id=client_id), ("", client_id)),
        (entity(client_id=None), ("", client_id)),
    ]


class QuotaStore:
    """The quotas in force (what the metadata records say): entity -> key -> value.
    ``generation`` moves on every change, so readers can cache resolutions."""

    def __init__(self) -> None:
        self._by_entity: dict[QuotaEntity, dict[str, float]] = {}
        self.generation = 0
        self._resolved: dict[tuple[str, str, str], QuotaMatch | None] = {}

    def __len__(self) -> int:
        return len(self._by_entity)

    def __bool__(self) -> bool:
        return bool(self._by_entity)

    def items(self) -> Iterator[tuple[QuotaEntity, Mapping[str, float]]]:
        return iter([(e, dict(v)) for e, v in self._by_entity.items()])

    def get(self, e: QuotaEntity) -> Mapping[str, float]:
        return dict(self._by_entity.get(e, {}))

    def set(self, e: QuotaEntity, key: str, value: float) -> None:
        self._by_entity.setdefault(e, {})[key] = value
        self._changed()

    def remove(self, e: QuotaEntity, key: str) -> None:
        values = self._by_entity.get(e)
        if values is None or key not in values:
            return
        del values[key]
        if not values:
            del self._by_entity[e]
        self._changed()

    def describe(self, components: list[FilterComponent], strict: bool
                 ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        return [(e, dict(v)) for e, v in sorted(self._by_entity.items(), key=lambda i: str(i[0]))
                if filter_matches(components, strict, e)]

    def resolve(self, key: QuotaType, user: str, client_id: str) -> QuotaMatch | None:
        """The quota of ``key`` for a connection of ``user`` (the principal's name) and
        ``client_id``, by Kafka's precedence; None: not limited."""
        cache_key = (key.value, user, client_id)
        if cache_key in self._resolved:
            return self._resolved[cache_key]
        found: QuotaMatch | None = None
        for e, tags in precedence(user, client_id):
            value = self._by_entity.get(e, {}).get(key.value)
            if value is not None:
                found = QuotaMatch(value, tags, e)
                break
        if len(self._resolved) >= 10_000:  # bounded: client ids come from the wire
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    def _changed(self) -> None:
        self.generation += 1
        self._resolved.clear()


# -- the sampled rate and the throttle time ------------------------------------------------------
class SampledRate:
    """Kafka's ``Rate`` over a ``SampledStat`` of ``samples`` windows of ``window_ms`` each (per
    second). Memory: at most ``samples`` (start, total) pairs."""

    __slots__ = ("_current", "_starts", "_totals", "samples", "window_ms")

    def __init__(self, samples: int = QUOTA_WINDOW_NUM_DEFAULT,
                 window_ms: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT * 1000) -> None:
        if samples < 2 or window_ms < 1:
            raise ValueError(f"quota.window.num={samples} must be >= 2 and the window >= 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._starts: list[int] = []
        self._totals: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._starts.append(now_ms)
            self._totals.append(0.0)
            self._current = 0
        elif now_ms - self._starts[self._current] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._starts.append(now_ms)
                self._totals.append(0.0)
            else:
                self._starts[self._current] = now_ms
                self._totals[self._current] = 0.0
        self._totals[self._current] += value

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire_ms:
                self._starts[i] = now_ms
                self._totals[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: since the oldest kept sample opened, padded to
        ``samples - 1`` full windows, at least 1 ms (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed_ms = now_ms - oldest
        full = elapsed_ms // self.window_ms
        if full < self.samples - 1:
            elapsed_ms += (self.samples - 1 - full) * self.window_ms
        return max(elapsed_ms, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(self._totals)

    def rate(self, now_ms: int) -> float:
        """Per second, over ``window_size_ms``."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def idle(self, now_ms: int) -> bool:
        """Nothing recorded within the whole window: the rate is 0 and the sensor may go."""
        return self.total(now_ms) == 0


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """How long a client measured at ``rate`` over ``window_ms`` must wait for the rate to be
    back at ``bound``: ``(rate - bound) / bound * window_ms`` rounded, 0 when not over."""
    if rate <= bound or bound <= 0:
        return 0
    return max(0, round((rate - bound) / bound * window_ms))


def record_and_throttle(sensor: SampledRate, value: float, bound: float, now_ms: int,
                        max_throttle_ms: int | None = None) -> int:
    """Record ``value`` at ``now_ms``, then the throttle time the new rate calls for (Kafka's
    ``maybeRecordAndGetThrottleTimeMs``); ``max_throttle_ms`` bounds it (request quotas)."""
    sensor.record(value, now_ms)
    window_ms = sensor.window_size_ms(now_ms)
    rate = sensor.total(now_ms) / (window_ms / 1000.0)
    throttle_ms = throttle_time_ms(rate, bound, window_ms)
    if max_throttle_ms is not None:
        throttle_ms = min(throttle_ms, max_throttle_ms)
    return throttle_ms


class TokenBucket:
    """KIP-599's bucket for ``controller_mutation_rate``: tokens (partition mutations) refill at
    ``rate`` per second up to ``burst`` (Kafka: ``rate x quota.window.num x window seconds``).
    A mutation is admitted while tokens remain (> 0) and may take the bucket below zero; the
    throttle time is how long until the bucket is back at zero."""

    __slots__ = ("_last_ms", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now_ms: int) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last_ms = now_ms

    def tokens(self, now_ms: int) -> float:
        if now_ms > self._last_ms:
            self._tokens = min(self.burst,
                               self._tokens + (now_ms - self._last_ms) / 1000.0 * self.rate)
            self._last_ms = now_ms
        return self._tokens

    def admits(self, now_ms: int) -> bool:
        return self.tokens(now_ms) > 0

    def take(self, permits: float, now_ms: int) -> None:
        self._tokens = self.tokens(now_ms) - permits

    def throttle_ms(self, now_ms: int) -> int:
        tokens = self.tokens(now_ms)
        if tokens >= 0 or self.rate <= 0:
            return 0
        return math.ceil(-tokens / self.rate * 1000)

    def idle(self, now_ms: int) -> bool:
        """Full again: forgetting it changes nothing."""
        return self.tokens(now_ms) >= self.burst
