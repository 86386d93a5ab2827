"""SPEC §4, the partition's safety properties, each defined once over a small replica view.

The simulator's checker (``sim/partition/checker.py``: after every event of a schedule) and the
model checker (``mc/invariants.py``: in every reachable state, across every step) both turn what
they hold into ``ReplicaView`` values and judge them with these functions. Each answers with a
one-line description of the violation, or None when the property holds. The runners differ only
in *which* values they compare: the simulator keeps histories over one run (every leader
there was, each acknowledged write), the model checker compares a state with its successor.

====================  ============================================================================
function              property
====================  ============================================================================
hw_above_leo          HW <= LEO on every replica
lso_above_hw          the last stable offset is at most the HW
other_leader          no two replicas lead one leader epoch (over a history or one state)
log_mismatch          below min(HW_a, HW_b) two replicas hold identical records
leader_hw_decreased   a leader's HW never goes back while it leads
epoch_decreased       the leader epoch a replica knows never goes back
lacks_record          a record that must be kept (committed, acknowledged, consumed) is held
commit_conflict       one record per committed (or acknowledged) offset, ever
divergence            no two replicas hold different records at one offset (at the end)
uncommitted_shown     read_committed shows a transactional record only once its COMMIT is
                      decided (not while it is open, never when it is aborted)
duplicate_record      with the idempotent producer, no record is written twice
====================  ============================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

Record = object
"""A record as a runner names it: the simulator's value text, the model checker's record id."""


class ReplicaView(NamedTuple):
    """What the properties read of one running replica."""

    name: str
    log: Sequence[tuple[int, Record]]
    """(leader epoch stamped in its batch, record) at each offset, from offset 0."""
    high_watermark: int
    leader_epoch: int
    """The leader epoch the replica knows (-1: none yet)."""
    is_leader: bool
    last_stable_offset: int = -1
    """-1 where the runner keeps no producer state (the model checker's replicas)."""

    @property
    def log_end_offset(self) -> int:
        return len(self.log)

    def record_at(self, offset: int) -> Record | None:
        return self.log[offset][1] if 0 <= offset < len(self.log) else None


def hw_above_leo(replica: ReplicaView) -> str | None:
    if replica.high_watermark > replica.log_end_offset:
        return f"{replica.name} HW {replica.high_watermark} > LEO {replica.log_end_offset}"
    return None


def lso_above_hw(replica: ReplicaView) -> str | None:
    if replica.last_stable_offset > replica.high_watermark:
        return f"{replica.name} LSO {replica.last_stable_offset} > HW {replica.high_watermark}"
    return None


def other_leader(leaders_by_epoch: Mapping[int, str], epoch: int, name: str) -> str | None:
    """The other replica already known to lead ``epoch``, if any."""
    holder = leaders_by_epoch.get(epoch, name)
    return holder if holder != name else None


def two_leaders(epoch: int, first: str, second: str) -> str:
    return f"{first} and {second} both led epoch {epoch}"


def one_leader_per_epoch(replicas: Iterable[ReplicaView]) -> str | None:
    """``other_leader`` over the replicas that lead now."""
    leaders: dict[int, str] = {}
    for replica in replicas:
        if not replica.is_leader:
            continue
        holder = other_leader(leaders, replica.leader_epoch, replica.name)
        if holder is not None:
            return two_leaders(replica.leader_epoch, holder, replica.name)
        leaders[replica.leader_epoch] = replica.name
    return None


def log_mismatch(a: ReplicaView, b: ReplicaView) -> str | None:
    """Log matching: what is below both replicas' HW is identical on both."""
    bound = min(a.high_watermark, b.high_watermark)
    if bound <= 0 or a.log[:bound] == b.log[:bound]:
        return None
    at = next(o for o in range(bound) if a.log[o] != b.log[o])
    return (f"{a.name} and {b.name} differ at offset {at} below min HW {bound}: "
            f"{a.log[at]} vs {b.log[at]}")


def log_matching(replicas: Sequence[ReplicaView]) -> str | None:
    """``log_mismatch`` over every pair."""
    for i, a in enumerate(replicas):
        for b in replicas[i + 1:]:
            found = log_mismatch(a, b)
            if found is not None:
                return found
    return None


def leader_hw_decreased(name: str, leader_epoch: int, old: int, new: int) -> str | None:
    """A leader's HW moved back while it led (``old`` earlier in the same leadership)."""
    if new < old:
        return f"leader {name}'s HW went from {old} to {new} in epoch {leader_epoch}"
    return None


def epoch_decreased(name: str, old: int, new: int) -> str | None:
    if new < old:
        return f"{name} went from epoch {old} to {new}"
    return None


def lacks_record(replica: ReplicaView, offset: int, record: Record, *,
                 epoch: int | None = None, what: str = "committed",
                 who: str | None = None) -> str | None:
    """``replica`` must hold ``record`` at ``offset`` (stamped ``epoch`` when given);
    ``who``: how the replica is named in the answer (its name by default)."""
    held = replica.record_at(offset)
    if held == record and (epoch is None or replica.log[offset][0] == epoch):
        return None
    have = "nothing" if held is None else held
    return f"{who or replica.name} lacks {what} {record} at offset {offset} (has {have})"


def commit_conflict(known: Mapping[int, Record], offset: int, record: Record) -> Record | None:
    """The record known earlier at ``offset`` when it differs from ``record``."""
    earlier = known.get(offset, record)
    return earlier if earlier != record else None


def divergence(replicas: Sequence[ReplicaView]) -> str | None:
    """The first offset at which two replicas hold different entries."""
    longest = max((r.log_end_offset for r in replicas), default=0)
    for offset in range(longest):
        holders = [r for r in replicas if offset < r.log_end_offset]
        if len({r.log[offset] for r in holders}) > 1:
            detail = ", ".join(f"{r.name}={r.log[offset][1]}@e{r.log[offset][0]}"
                               for r in holders)
            return f"replicas differ at offset {offset}: {detail}"
    return None


def uncommitted_shown(committed: bool | None) -> str | None:
    """Why a read_committed consumer must not be shown a record of a transaction whose
    decision is ``committed`` (None: not decided, or its COMMIT is not below the LSO yet):
    "open", "aborted", or None when it may."""
    if committed is None:
        return "open"
    return None if committed else "aborted"


def duplicate_record(replica: ReplicaView,
                     is_marker: Callable[[Record], bool] | None = None) -> str | None:
    """The first record ``replica`` holds twice (transaction markers excepted: a retried
    marker is written again and completes nothing; ``is_marker`` tells them)."""
    first: dict[Record, int] = {}
    for offset, (_epoch, record) in enumerate(replica.log):
        if is_marker is not None and is_marker(record):
            continue
        if record in ("", None):
            continue
        if record in first:
            return f"{replica.name} holds {record} at offsets {first[record]} and {offset}"
        first[record] = offset
    return None
