"""Which data dir each voter is (KIP-853's voter key: node id + directory id), as one rule.

A controller data dir gets a directory id (a uuid, ``directory_id.py``) when it is first
formatted. The quorum binds each voter's node id to the directory it saw that voter on, through
a ``voters`` record the leader appends and the quorum commits; every voter keeps the committed
bindings in its ``quorum-state`` file and the leader hands them out with every fetch answer.

``accepts`` is the rule: node ``n`` on directory ``d`` is that voter when ``n`` is bound to
``d``, or not bound at all (a cluster still forming: KIP-595's static voter set). A voter back
on a new directory (its disk was lost: the votes it cast and the records it acknowledged are
gone) is not accepted: it is an observer that neither votes nor stands, its fetches do not count
towards the high watermark, until the leader re-binds its id to the new directory — only once it
has caught up, and only with a record committed *without* it (``admission_candidate``).

Why that is safe (the quorum is n voters, majority m): while voter w is refused, every quorum is
m of the other n - 1, so it meets any earlier quorum (which may hold w's lost promises) in a
voter that kept its own. The binding record R is committed by such a quorum A after the leader
committed a record of its own epoch: A holds every record committed before (leader
completeness) and R after them, so any later quorum that counts w's new directory meets A in a
voter holding all of them; and any vote w cast before it lost its disk was in an epoch no later
than R's (a voter of A holding R refuses a candidate that lacks R, and a candidate that stood
before R was written lacks it), while the new w votes only after it learned R committed, from
the leader of R's epoch, and never in that epoch for anyone else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VoterDirectory:
    """Voter ``voter_id`` is the data dir ``directory_id`` since the ``voters`` record at
    ``bound_at`` was committed (a later binding of the same id replaces it)."""

    voter_id: int
    directory_id: str
    bound_at: int


Bindings = tuple[VoterDirectory, ...]  # sorted by voter id, at most one per id
BOOTSTRAP = -1  # ``bound_at`` of a binding written when the quorum was formed (before any record)


def directory_of(bindings: Bindings, voter_id: int) -> str | None:
    for b in bindings:
        if b.voter_id == voter_id:
            return b.directory_id
    return None


def accepts(bindings: Bindings, voter_id: int, directory_id: str) -> bool:
    """Node ``voter_id`` on ``directory_id`` counts as that voter (votes, stands, acknowledges)."""
    bound = directory_of(bindings, voter_id)
    return bound is None or bound == directory_id


def merge(mine: Bindings, theirs: Iterable[VoterDirectory]) -> Bindings:
    """Both sides' committed bindings: per voter, the later one (committed bindings of one id
    are ordered by the offset of their record)."""
    best = {b.voter_id: b for b in mine}
    for b in theirs:
        held = best.get(b.voter_id)
        if held is None or b.bound_at > held.bound_at:
            best[b.voter_id] = b
    return tuple(best[v] for v in sorted(best))


def admission_candidate(bindings: Bindings, seen: Iterable[tuple[int, str, int]],
                        high_watermark: int) -> tuple[int, str] | None:
    """The leader's next binding, one at a time (KIP-853 changes one voter at a time): among
    the voters it has heard from as (id, directory, fetch offset), the first whose id is not
    bound yet (a forming cluster), else the first on a new directory that has fetched up to the
    high watermark (caught up). None: nothing to bind."""
    waiting: list[tuple[int, str]] = []
    for voter_id, directory_id, fetch_offset in sorted(seen):
        if not directory_id:
            continue  # a peer that names no directory cannot be bound
        bound = directory_of(bindings, voter_id)
        if bound is None:
            return voter_id, directory_id
        if bound != directory_id and fetch_offset >= high_watermark:
            waiting.append((voter_id, directory_id))
    return waiting[0] if waiting else None
