"""The simulated world: a virtual clock, a seeded RNG and one ordered event queue.

Everything nondeterministic in a simulation goes through a ``World``: time (``now_ms``), random
choices (``rng``) and the order in which things happen (events ordered by (time, sequence)).
The same seed therefore replays the same run, event for event; ``trace_hash`` fingerprints it.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Callable
from typing import Any

from floodmark.errors import FloodmarkError

MAX_EVENTS_DEFAULT = 2_000_000


class SimulationLimitError(FloodmarkError, RuntimeError):
    """A run exceeded its event budget (every loop in the simulator is bounded)."""


class World:
    """Virtual time and a FIFO-at-equal-times event queue. Single-threaded, no wall clock."""

    def __init__(
        self, seed: int, *, start_ms: int = 0, max_events: int = MAX_EVENTS_DEFAULT
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = start_ms
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.events_run = 0
        self.max_events = max_events
        self.trace: list[str] = []
        self._hash = hashlib.sha256()
        self.trace_enabled = True

    # -- scheduling ---------------------------------------------------------------------------
    def schedule(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        if delay_ms < 0:
            raise ValueError(f"cannot schedule in the past ({delay_ms} ms)")
        self._seq += 1
        heapq.heappush(self._queue, (self.now_ms + delay_ms, self._seq, fn, args))

    def pending(self) -> int:
        return len(self._queue)

    def next_time_ms(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def step(self) -> bool:
        """Run the next event; False when the queue is empty."""
        if not self._queue:
            return False
        when, _seq, fn, args = heapq.heappop(self._queue)
        self.now_ms = when
        self.events_run += 1
        if self.events_run > self.max_events:
            raise SimulationLimitError(f"more than {self.max_events} events (seed {self.seed})")
        fn(*args)
        return True

    def run_until(self, time_ms: int, after_event: Callable[[], None] | None = None) -> None:
        """Run every event scheduled at or before ``time_ms``; then the clock reads ``time_ms``."""
        while self._queue and self._queue[0][0] <= time_ms:
            self.step()
            if after_event is not None:
                after_event()
        self.now_ms = max(self.now_ms, time_ms)

    def run_until_idle(self, limit_ms: int = 60_000) -> None:
        """Run until nothing is scheduled within ``limit_ms`` of virtual time from now."""
        deadline = self.now_ms + limit_ms
        while self._queue and self._queue[0][0] <= deadline:
            self.step()

    # -- trace ----------------------------------------------------------------------------------
    def record(self, line: str) -> None:
        """Append one line to the trace (and the running hash)."""
        text = f"{self.now_ms:>8} {line}"
        self._hash.update(text.encode())
        self._hash.update(b"\n")
        if self.trace_enabled:
            self.trace.append(text)

    @property
    def trace_hash(self) -> str:
        return self._hash.hexdigest()
