"""The partition's periodic work, as timers the core owns (``Partition.next_deadline_ms`` /
``Partition.tick``), the way ``controller/quorum``'s core owns its election and fetch timers.

Kafka's broker runs a handful of scheduled tasks for every partition it hosts:

=====================  ======================================  =================================
work                   every                                   what the core returns
=====================  ======================================  =================================
``ISR_CHECK``          ``replica.lag.time.max.ms`` / 2          ``ProposeIsr`` (a shrink), or none
``FLUSH``              the runner's flush check interval        ``FlushLog`` (the log's flush
                                                               policy, ``log.flush.*``, decides)
``CHECKPOINT``         the HW checkpoint interval               ``CheckpointHighWatermark``
=====================  ======================================  =================================

plus one more that has no period: a produce parked in the purgatory expires at its own deadline
(``REQUEST_TIMED_OUT``). The runner asks ``next_deadline_ms()`` (``None``: nothing is due, ever)
and calls ``tick(now_ms)`` at that time or later; it never decides when the work is due itself.

Due times are aligned to multiples of each interval (the first due time is the next multiple
strictly after the start), so every partition of a broker checkpoints in the same tick and the
broker writes one checkpoint file per interval, not one per partition. A runner that wants a
different phase (the simulator draws the OS writeback's) passes the first due time.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class PeriodicWork(enum.Enum):
    ISR_CHECK = "isr-check"
    FLUSH = "flush"
    CHECKPOINT = "checkpoint"


def first_due_ms(now_ms: int, interval_ms: int) -> int:
    """The next multiple of ``interval_ms`` strictly after ``now_ms``."""
    return (now_ms // interval_ms + 1) * interval_ms


@dataclass(slots=True)
class Schedule:
    """Interval timers, one per kind of periodic work; a work without an interval never runs."""

    intervals_ms: dict[PeriodicWork, int] = field(default_factory=dict)
    due_ms: dict[PeriodicWork, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for work, interval in self.intervals_ms.items():
            if interval <= 0:
                raise ValueError(f"{work.value} interval must be positive, got {interval} ms")

    def start(self, now_ms: int, first_due: Mapping[PeriodicWork, int] | None = None) -> None:
        """Arm every timer from ``now_ms`` (again after a restart): aligned, or at
        ``first_due[work]`` where given (never in the past)."""
        first_due = first_due or {}
        self.due_ms = {
            work: max(now_ms, first_due[work]) if work in first_due
            else first_due_ms(now_ms, interval)
            for work, interval in self.intervals_ms.items()
        }

    @property
    def started(self) -> bool:
        return bool(self.due_ms)

    def next_deadline_ms(self) -> int | None:
        return min(self.due_ms.values(), default=None)

    def take_due(self, now_ms: int) -> list[PeriodicWork]:
        """The work due at ``now_ms``, in ``PeriodicWork`` order; each is re-armed one interval
        on from its due time, or from ``now_ms`` when the runner was late by a whole interval or
        more (a paused process runs a missed task once, not once per missed interval)."""
        due: list[PeriodicWork] = []
        for work in PeriodicWork:
            at = self.due_ms.get(work)
            if at is None or now_ms < at:
                continue
            due.append(work)
            interval = self.intervals_ms[work]
            following = at + interval
            self.due_ms[work] = following if following > now_ms else first_due_ms(now_ms,
                                                                                   interval)
        return due
