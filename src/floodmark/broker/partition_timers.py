"""When each hosted partition's periodic work is next due, as one deadline heap, so that a wake
of the broker's periodic loop costs in proportion to the partitions with something due, not to
every partition it hosts.

The core owns the timers (``Partition.next_deadline_ms`` / ``tick``); this heap only remembers
the answers. An entry may be early (the partition's deadline moved later: the wake finds
nothing due, asks again and re-arms), never late: every input that can make a deadline earlier
(a produce parked in the core's purgatory, new timers after a reconfiguration) goes through
``PartitionState.apply``, which marks the partition ``touched``; the loop re-reads the
deadlines of the touched partitions before it sleeps (``refresh``).

Entries are removed lazily: a key's live entry is the one whose deadline equals ``_due[key]``;
any other is skipped when it reaches the top. The heap is rebuilt when stale entries
outnumber live ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

PartitionKey = tuple[str, int]

_COMPACT_SLACK = 64  # stale entries tolerated beyond the live count before a rebuild


class PartitionTimers:
    def __init__(self) -> None:
        self._heap: list[tuple[int, PartitionKey]] = []
        self._due: dict[PartitionKey, int] = {}  # key -> the deadline of its live entry
        self._touched: set[PartitionKey] = set()

    def __len__(self) -> int:
        return len(self._due)

    def touch(self, key: PartitionKey) -> None:
        """The partition had an input that may have moved its deadline (O(1))."""
        self._touched.add(key)

    def arm(self, key: PartitionKey, deadline_ms: int | None) -> None:
        """The partition's deadline is ``deadline_ms`` (None: nothing due until its next
        input). An earlier deadline than the live entry's replaces it; a later one leaves the
        early entry in place (one spurious look, see the module's note)."""
        if deadline_ms is None:
            return
        current = self._due.get(key)
        if current is not None and current <= deadline_ms:
            return
        self._due[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, key))
        if len(self._heap) > 2 * len(self._due) + _COMPACT_SLACK:
            self._heap = [(d, k) for k, d in self._due.items()]
            heapq.heapify(self._heap)

    def discard(self, key: PartitionKey) -> None:
        self._due.pop(key, None)
        self._touched.discard(key)

    def refresh(self, deadline_of: Callable[[PartitionKey], int | None]) -> None:
        """Re-read the deadline of every partition touched since the last refresh."""
        touched, self._touched = self._touched, set()
        for key in touched:
            self.arm(key, deadline_of(key))

    def next_deadline_ms(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, key = heap[0]
            if self._due.get(key) == deadline:
                return deadline
            heapq.heappop(heap)  # stale
        return None

    def pop_due(self, now_ms: int) -> list[PartitionKey]:
        """The partitions whose live entry is due at ``now_ms``, in deadline order; they have
        no entry afterwards (the caller ticks them and arms their next deadline)."""
        heap = self._heap
        due: list[PartitionKey] = []
        while heap and heap[0][0] <= now_ms:
            deadline, key = heapq.heappop(heap)
            if self._due.get(key) == deadline:
                del self._due[key]
                due.append(key)
        return due
