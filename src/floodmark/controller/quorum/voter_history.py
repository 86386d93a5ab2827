"""The voter set as replicated state (KIP-853): which ``voter_set`` records a voter's log holds.

A ``voter_set`` record (Kafka's ``VotersRecord``: every voter's id and data dir) is appended by
the leader, one change at a time, and is in force on a replica as soon as it is in that
replica's log, committed or not: the set in force is the one of the latest such record below
the log end offset, else the bootstrap set (``controller.quorum.voters``). A record cut by a
truncation stops being in force with it. That is KIP-853's rule (and Raft's single-server
change, Ongaro's thesis §4.1): two sets in force at once differ by one voter, so any majority
of one meets any majority of the other.

The quorum core keeps the entries (offset, voters) in the ``quorum-state`` file rather than
reading its log: a follower learns them from the leader's fetch answer *before* it appends the
records they describe (written first, so a crash never leaves a record in the log that the file
lacks), and ignores every entry at or above its log end offset.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Voters = tuple[tuple[int, str], ...]
"""(voter id, directory id) sorted by id; directory "" when not known."""
Endpoints = tuple[tuple[int, str], ...]
"""(voter id, ``host:port`` of its controller listener) sorted by id, for the voters whose
endpoint a record names (KIP-853's VotersRecord ``Endpoints``; UpdateRaftVoter changes one)."""


@dataclass(frozen=True, slots=True)
class VoterSetEntry:
    """The ``voter_set`` record at ``offset`` names ``voters``."""

    offset: int
    voters: Voters
    endpoints: Endpoints = ()
    """The voters' endpoints the record names (none: the bootstrap addresses hold)."""

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v for v, _ in self.voters)


VoterHistory = tuple[VoterSetEntry, ...]  # ascending offsets, one entry per offset


def entry_to_json(entry: VoterSetEntry) -> list[object]:
    """``[offset, [[id, dir]...]]``, with ``[[id, host:port]...]`` third when it names any
    endpoint (the ``quorum-state`` file and the fetch answer, one form)."""
    out: list[object] = [entry.offset, [[v, d] for v, d in entry.voters]]
    if entry.endpoints:
        out.append([[v, e] for v, e in entry.endpoints])
    return out


def entry_from_json(value: object) -> VoterSetEntry:
    """``entry_to_json``'s inverse; ValueError on anything else."""
    try:
        assert isinstance(value, list) and len(value) in (2, 3)
        at, voters, *rest = value
        endpoints = rest[0] if rest else []
        return VoterSetEntry(int(at), tuple((int(v), str(d)) for v, d in voters),
                             tuple((int(v), str(e)) for v, e in endpoints))
    except (AssertionError, TypeError, ValueError):
        raise ValueError("a voter set entry is not [offset, [[id, dir]...], "
                         "[[id, host:port]...]]") from None


def voters_of(ids: Iterable[int], directories: dict[int, str] | None = None) -> Voters:
    found = directories or {}
    return tuple((v, found.get(v, "")) for v in sorted(set(ids)))


def latest_entry(history: VoterHistory, end_offset: int) -> VoterSetEntry | None:
    """The newest entry below ``end_offset`` (the log end offset): None, the bootstrap set."""
    found: VoterSetEntry | None = None
    for entry in history:
        if entry.offset < end_offset:
            found = entry
    return found


def in_force(history: VoterHistory, end_offset: int, bootstrap: tuple[int, ...]
             ) -> tuple[int, ...]:
    """The voter ids in force for a log ending at ``end_offset``."""
    entry = latest_entry(history, end_offset)
    return tuple(sorted(bootstrap)) if entry is None else entry.ids


def endpoints_in_force(history: VoterHistory, end_offset: int) -> dict[int, str]:
    """Each voter's endpoint as the latest record below ``end_offset`` names it (a voter it
    does not name: its ``controller.quorum.voters`` address holds)."""
    entry = latest_entry(history, end_offset)
    return {} if entry is None else dict(entry.endpoints)


def with_endpoint(endpoints: Endpoints, voters: Voters, voter_id: int | None = None,
                  endpoint: str = "") -> Endpoints:
    """``endpoints`` kept for the ``voters`` only, ``voter_id``'s replaced by ``endpoint``."""
    found = dict(endpoints)
    if voter_id is not None:
        found[voter_id] = endpoint
    ids = {v for v, _ in voters}
    return tuple((v, found[v]) for v in sorted(found) if v in ids)


def uncommitted(history: VoterHistory, high_watermark: int, end_offset: int) -> bool:
    """A change is in the log and not committed yet (the next one must wait for it)."""
    return any(high_watermark <= e.offset < end_offset for e in history)


def appended(history: VoterHistory, entry: VoterSetEntry) -> VoterHistory:
    """The leader appends a record at ``entry.offset`` (its log end offset)."""
    return (*(e for e in history if e.offset < entry.offset), entry)


def replace_from(history: VoterHistory, offset: int, leader: Iterable[VoterSetEntry],
                 upto: int) -> VoterHistory:
    """A follower about to append the leader's records ``[offset, upto)``: its own entries from
    ``offset`` on are void (that part of its log is the leader's from now), the leader's in the
    range take their place."""
    mine = tuple(e for e in history if e.offset < offset)
    return (*mine, *(e for e in leader if offset <= e.offset < upto))


def truncated(history: VoterHistory, end_offset: int) -> VoterHistory:
    """The log was cut at ``end_offset``: the records from there are gone."""
    return tuple(e for e in history if e.offset < end_offset)


def trimmed(history: VoterHistory, log_start_offset: int) -> VoterHistory:
    """Entries still worth keeping: every one from ``log_start_offset`` on, and the last one
    before it (in force at the log start)."""
    before = [e for e in history if e.offset < log_start_offset]
    return (*before[-1:], *(e for e in history if e.offset >= log_start_offset))
