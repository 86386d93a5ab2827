"""The controller quorum's safety properties, each defined once, over plain values.

``QuorumWorld`` (the simulator, ``floodmark sim quorum``) and the quorum model checker
(``floodmark sim check-quorum``) both judge the quorum with these functions; each takes what a
voter holds as ``{offset: (epoch, value)}`` and answers with the evidence of a violation (None
when the property holds), so the two checkers report the same invariant names and details.

* ``election-safety``: at most one leader per epoch, ever;
* ``leader-completeness``: a voter that becomes leader holds every record committed before;
* ``committed-record-changed``: one value per committed offset, ever;
* ``committed-record-lost``: a committed record stays on a majority of the voters' disks, and no
  voter cuts its log below its own high watermark;
* ``log-matching``: two voters with the same epoch at an offset hold the same records up to it;
* ``leader-hw-monotonic``: a leader's HW never decreases within its epoch;
* ``hw-le-leo``: HW <= LEO on every voter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from floodmark.controller import majority
from floodmark.spec.entries import Entry

Entries = Mapping[int, Entry]

ELECTION_SAFETY = "election-safety"
LEADER_COMPLETENESS = "leader-completeness"
COMMITTED_CHANGED = "committed-record-changed"
COMMITTED_LOST = "committed-record-lost"
LOG_MATCHING = "log-matching"
LEADER_HW_MONOTONIC = "leader-hw-monotonic"
HW_LE_LEO = "hw-le-leo"


def other_leader(leaders_by_epoch: Mapping[int, int], epoch: int, node: int) -> int | None:
    """Election safety: the other voter that already led ``epoch``, if any."""
    holder = leaders_by_epoch.get(epoch, node)
    return holder if holder != node else None


def missing_committed(entries: Entries, committed: Entries) -> tuple[int, Entry] | None:
    """Leader completeness: the first committed (offset, record) a new leader lacks."""
    for offset, entry in sorted(committed.items()):
        if entries.get(offset) != entry:
            return offset, entry
    return None


def commit_conflict(committed: Entries, offset: int, entry: Entry) -> Entry | None:
    """The record committed earlier at ``offset`` when it differs from ``entry``."""
    known = committed.get(offset, entry)
    return known if known != entry else None


def log_matching(logs: Mapping[int, Entries]) -> tuple[int, int, int, int] | None:
    """Log matching: (voter a, voter b, top, offset) where a and b hold the same epoch at
    ``top`` but differ at ``offset`` <= top; None when every pair matches."""
    ids = sorted(logs)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            la, lb = logs[a], logs[b]
            common = sorted(set(la) & set(lb), reverse=True)
            top = next((o for o in common if la[o][0] == lb[o][0]), None)
            if top is None:
                continue
            for offset in range(0, top + 1):
                if la.get(offset) != lb.get(offset):
                    return a, b, top, offset
    return None


def under_replicated(committed: Entries, logs: Iterable[Entries],
                     voters: int, absent: int = 0) -> tuple[int, Entry, int] | None:
    """The first committed (offset, record) held by fewer than a majority of the voters'
    logs (a crashed voter counts with what its disk will give back), with its holder count.

    ``absent``: voters that lost their disk and are not re-admitted (``logs`` leaves them
    out). They neither vote nor count, so every majority the quorum can still form lies among
    the others and meets the holders when holders + absent > voters - majority (a majority
    when none is absent, voters odd)."""
    needed = majority(voters) if absent == 0 else voters - majority(voters) - absent + 1
    held = list(logs)
    for offset, entry in sorted(committed.items()):
        holders = sum(1 for entries in held if entries.get(offset) == entry)
        if holders < needed:
            return offset, entry, holders
    return None


def hw_above_leo(high_watermark: int, log_end_offset: int) -> bool:
    return high_watermark > log_end_offset


def hw_cut(old: int, new: int) -> bool:
    """A voter's HW moved back (only a truncation below it can do that): a committed record
    was cut."""
    return new < old
