"""Availability as the client saw it: the longest time between two acknowledgements.

A chaos run's verdict says whether anything acknowledged was lost; this says how long the
cluster as a whole acknowledged nothing. Between consecutive ``send`` ``ok`` lines of the merged
history (every producer together), between the first acknowledgement and the last: the longest
gap is the write outage the worst fault caused, election and client rediscovery included.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any


def longest_ack_gap(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``longest_ack_gap_s`` (None with fewer than two acknowledgements) and
    ``longest_ack_gap``: its ``start`` and ``end`` (history wall-clock seconds) and the history
    ``lines`` of the two acknowledgements around it."""
    acks = sorted((float(e["time"]), int(e.get("line", 0))) for e in events
                  if e.get("f") == "send" and e.get("type") == "ok" and "time" in e)
    if len(acks) < 2:
        return {"longest_ack_gap_s": None, "longest_ack_gap": None}
    gap_s, at = max((b[0] - a[0], i) for i, (a, b) in enumerate(itertools.pairwise(acks)))
    (start, line_a), (end, line_b) = acks[at], acks[at + 1]
    return {"longest_ack_gap_s": round(gap_s, 3),
            "longest_ack_gap": {"start": start, "end": end, "lines": [line_a, line_b]}}
