"""``--group-protocol mixed``: the members' protocols and their scheduled switches (pure).

KIP-848's online migration converts a group both ways: a classic group that a
``group.protocol=consumer`` member joins becomes a consumer group (*upgrade*); a consumer group
whose last member speaking the consumer protocol leaves, or is fenced, while classic members
remain becomes a classic group again (*downgrade*). The mixed workload drives both while the
faults run: members start with alternating protocols (``initial``), and at each scheduled
switch (``switch_plan``) one member is ended and a new one joins speaking the *other*
protocol. Which protocol's member is ended (``retire``) walks the number of consumer-protocol
members down to none and up to all of them and back, so every walk down ends in a downgrade and
every walk up starts with an upgrade.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

CLASSIC = "classic"
CONSUMER = "consumer"
MEMBER_PROTOCOLS = (CLASSIC, CONSUMER)
# the first switch comes after the workload's warm-up; then about every ``every_s(...)``
FIRST_SWITCH_S = 3.0
SWITCH_EVERY_S = (3.0, 12.0)  # bounds of the switch interval, whatever the run's length
SWITCHES_PER_RUN = 8
JITTER = 0.3
KILL_P = 0.25  # a switch SIGKILLs its member (fenced at its session timeout), else SIGTERM
# A SIGKILLed member stays in the group until the coordinator fences it (its 6 s session, longer
# when the coordinator moves meanwhile): the walk counts it that long, so that the last member
# of a protocol, killed, is fenced (a conversion) before the next switch brings that protocol
# back.
FENCED_AFTER_S = 12.0


def other(protocol: str) -> str:
    """The protocol a member of ``protocol`` comes back with."""
    if protocol not in MEMBER_PROTOCOLS:
        raise ValueError(f"not a member protocol: {protocol!r}")
    return CONSUMER if protocol == CLASSIC else CLASSIC


def initial(members: int) -> list[str]:
    """The starting members' protocols: classic, consumer, classic, ... (the group is created
    by whichever reaches the coordinator first, and the other protocol joins it at once)."""
    return [MEMBER_PROTOCOLS[n % 2] for n in range(members)]


def every_s(time_limit_s: float) -> float:
    """The mean interval between switches: about ``SWITCHES_PER_RUN`` in a run, at least
    ``SWITCH_EVERY_S[0]`` apart (a rebalance has to finish) and at most ``SWITCH_EVERY_S[1]``."""
    low, high = SWITCH_EVERY_S
    return min(high, max(low, time_limit_s / SWITCHES_PER_RUN))


@dataclass(frozen=True)
class Switch:
    at_s: float  # after the faults begin
    kill: bool   # SIGKILL the member (else SIGTERM: it revokes and leaves)


def switch_plan(seed: int, time_limit_s: float) -> list[Switch]:
    """When a member switches protocol, and how it ends (seeded)."""
    rng = random.Random(f"protocol-switch:{seed}")
    mean = every_s(time_limit_s)
    out: list[Switch] = []
    t = FIRST_SWITCH_S + mean * rng.uniform(1 - JITTER, 1 + JITTER)
    while t < time_limit_s:
        out.append(Switch(round(t, 3), rng.random() < KILL_P))
        t += mean * rng.uniform(1 - JITTER, 1 + JITTER)
    return out


def retire(present: Sequence[str], downwards: bool) -> tuple[str, bool]:
    """Which protocol's member the next switch ends, given the protocols of the members in the
    group (running, and killed ones not yet fenced: ``FENCED_AFTER_S``) and the walk's
    direction (``downwards``: fewer consumer-protocol members); and the direction after it.
    The walk turns at none and at all. (When only a killed member speaks that protocol, the
    switch waits: it is skipped.)"""
    if not present:
        raise ValueError("no member is in the group")
    consumers = sum(1 for p in present if p == CONSUMER)
    if downwards and consumers == 0:
        downwards = False
    elif not downwards and consumers == len(present):
        downwards = True
    return (CONSUMER if downwards else CLASSIC), downwards
