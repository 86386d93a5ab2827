"""Controller-side partition changes as a pure builder (Kafka's ``PartitionChangeBuilder``).

``PartitionRegistration`` is the controller's record of one partition. Every change produces a new
registration with ``partition_epoch + 1``; a leader change also bumps ``leader_epoch`` by one
(ISR-only changes do not, as on MetadataVersion >= 3.6). Nothing here does I/O or keeps time.

Election (``elect_leader``), for the ONLINE election used on leader failure:

1. keep the current leader if it is still in the target ISR and acceptable;
2. else the first acceptable replica, in assignment order, that is in the target ISR (clean);
3. else, only if ``unclean_leader_election_enable``, the first acceptable replica in assignment
   order (unclean: the new ISR is just that leader and the leader recovery state is RECOVERING —
   data the ISR had committed may be lost, and floodmark reports it);
4. else no leader (-1). Without eligible leader replicas the ISR keeps its last member, so the
   partition waits for exactly that broker — even if it lost data ("last replica standing").

Eligible leader replicas (KIP-966 part 1) are optional: pass ``min_insync_replicas`` to
``build_change`` and ``apply_alter_partition``. Then the ISR may become empty; members that leave
while the ISR is below min ISR join the ELR (minus replicas with an unclean shutdown), and the ELR
is cleared once the ISR is back at min ISR. The leader's high watermark does not advance while the
ISR is below min ISR (strict min ISR, ``isr.leader_high_watermark``), so an ELR member holds every
committed record. With an empty ISR the first acceptable ELR member in assignment order is elected
(clean) and becomes the ISR. With both empty, the last leader (``last_known_elr``, Kafka's
LastKnownElr under balanced recovery) is elected when it is acceptable again: uncleanly (it may
have lost records in an unclean shutdown), but only when no replica is known to hold them all.

``acceptable`` means registered, unfenced and not shutting down; the caller passes that set.
``validate_alter_partition`` is the controller's compare-and-set check of an ISR proposal.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from floodmark.constants import NO_LEADER
from floodmark.errors import ErrorCode


class LeaderRecoveryState(enum.Enum):
    RECOVERED = 0
    RECOVERING = 1  # elected uncleanly (KIP-704); the leader reports RECOVERED when it takes over


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    elr: tuple[int, ...] = ()
    """Eligible leader replicas (KIP-966): former ISR members that may still lead because they
    left the ISR while it was below min ISR (so they hold every committed record). Only used when
    the builder is given ``min_insync_replicas``."""
    last_known_elr: tuple[int, ...] = ()
    """KIP-966's LastKnownElr as balanced recovery uses it: the leader when the ISR became empty,
    kept while ISR and ELR stay empty, elected (uncleanly) only if nothing else can be."""

    @classmethod
    def initial(
        cls, replicas: tuple[int, ...], acceptable: Collection[int]
    ) -> PartitionRegistration:
        """A new partition: ISR = acceptable replicas, leader = the first of them, epochs 0."""
        isr = tuple(r for r in replicas if r in acceptable)
        leader = isr[0] if isr else NO_LEADER
        return cls(replicas=replicas, isr=isr, leader=leader, leader_epoch=0, partition_epoch=0)


class ElectionKind(enum.Enum):
    KEPT = "kept"
    CLEAN = "clean"
    UNCLEAN = "unclean"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ElectionResult:
    leader: int
    kind: ElectionKind


def elect_leader(
    replicas: tuple[int, ...],
    target_isr: tuple[int, ...],
    current_leader: int,
    acceptable: Collection[int],
    *,
    unclean_leader_election_enable: bool,
) -> ElectionResult:
    """Pick the leader for ``target_isr`` (see the module docstring for the order)."""
    if current_leader in target_isr and current_leader in acceptable:
        return ElectionResult(current_leader, ElectionKind.KEPT)
    for replica in replicas:
        if replica in target_isr and replica in acceptable:
            return ElectionResult(replica, ElectionKind.CLEAN)
    if unclean_leader_election_enable:
        for replica in replicas:
            if replica in acceptable:
                return ElectionResult(replica, ElectionKind.UNCLEAN)
    return ElectionResult(NO_LEADER, ElectionKind.NONE)


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """The outcome of ``build_change``: the new registration and how its leader was chosen."""

    registration: PartitionRegistration
    election: ElectionKind


def _target_elr(
    current: PartitionRegistration,
    isr: tuple[int, ...],
    min_insync_replicas: int,
    unclean_shutdown: Collection[int],
) -> tuple[int, ...]:
    """KIP-966's ELR after the ISR becomes ``isr``: empty once the ISR is at min ISR (the HW may
    advance again without the others); else the old ELR plus the old ISR members that are not
    in the new ISR, minus replicas with an unclean shutdown, in assignment order."""
    if len(isr) >= min_insync_replicas:
        return ()
    pool = set(current.elr) | set(current.isr)
    return tuple(
        r for r in current.replicas if r in pool and r not in isr and r not in unclean_shutdown
    )


def _target_last_known_elr(
    current: PartitionRegistration, isr: tuple[int, ...]
) -> tuple[int, ...]:
    """The leader when the ISR empties; kept while it stays empty; cleared once it is not."""
    if isr:
        return ()
    if current.leader != NO_LEADER:
        return (current.leader,)
    return current.last_known_elr


def build_change(
    current: PartitionRegistration,
    *,
    target_isr: tuple[int, ...] | None = None,
    acceptable: Collection[int],
    unclean_leader_election_enable: bool = False,
    leader_recovered: bool = False,
    min_insync_replicas: int | None = None,
    unclean_shutdown: Collection[int] = (),
) -> PartitionChange | None:
    """Apply an ISR change and/or re-run the election; None when nothing would change.

    Without ELR (``min_insync_replicas`` None) the ISR never becomes empty: if every member
    would be removed, the last member stays and the partition goes leaderless until that broker
    is acceptable again. With ELR the ISR may empty and ``unclean_shutdown`` replicas (they lost
    unflushed data) are dropped from the ISR and the ELR.
    """
    replicas = current.replicas
    elr_enabled = min_insync_replicas is not None
    isr = current.isr if target_isr is None else target_isr
    isr = tuple(r for r in replicas if r in isr and not (elr_enabled and r in unclean_shutdown))
    if not isr and not elr_enabled:
        isr = current.isr[-1:] if current.isr else ()
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    if elr_enabled:
        assert min_insync_replicas is not None
        elr = _target_elr(current, isr, min_insync_replicas, unclean_shutdown)
        last_known_elr = _target_last_known_elr(current, isr)
    result = elect_leader(
        replicas,
        isr,
        current.leader,
        acceptable,
        unclean_leader_election_enable=False,
    )
    if result.kind is ElectionKind.NONE and elr_enabled and not isr:
        for replica in replicas:
            if replica in elr and replica in acceptable:
                result = ElectionResult(replica, ElectionKind.CLEAN)
                isr = (replica,)
                elr = tuple(r for r in elr if r != replica)
                break
    if (
        result.kind is ElectionKind.NONE
        and elr_enabled
        and not isr
        and not elr
        and len(current.last_known_elr) == 1
        and current.last_known_elr[0] in acceptable
    ):
        # Balanced recovery: no replica is known to hold every committed record; the last
        # leader is the best guess (what Kafka without ELR would elect). Unclean: it may not.
        result = ElectionResult(current.last_known_elr[0], ElectionKind.UNCLEAN)
    if result.kind is ElectionKind.NONE and unclean_leader_election_enable:
        result = elect_leader(
            replicas, (), NO_LEADER, acceptable, unclean_leader_election_enable=True
        )
    recovery = current.leader_recovery_state
    if result.kind is ElectionKind.UNCLEAN:
        isr = (result.leader,)
        elr = ()
        recovery = LeaderRecoveryState.RECOVERING
    elif leader_recovered:
        recovery = LeaderRecoveryState.RECOVERED
    if isr:
        last_known_elr = ()
    leader_epoch = current.leader_epoch
    if result.leader != current.leader:
        leader_epoch += 1
    candidate = replace(
        current,
        isr=isr,
        leader=result.leader,
        leader_epoch=leader_epoch,
        leader_recovery_state=recovery,
        elr=elr,
        last_known_elr=last_known_elr,
    )
    if candidate == current:
        return None
    return PartitionChange(
        replace(candidate, partition_epoch=current.partition_epoch + 1), result.kind
    )


def bump_leader_epoch(current: PartitionRegistration) -> PartitionRegistration:
    """A forced leader-epoch bump with the same leader (e.g. a reassignment, or a test of
    KAFKA-7164): both epochs advance."""
    return replace(
        current,
        leader_epoch=current.leader_epoch + 1,
        partition_epoch=current.partition_epoch + 1,
    )


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """An ISR proposal from the leader (AlterPartition, KIP-497/841/903)."""

    broker_id: int
    broker_epoch: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    new_isr_broker_epochs: tuple[int, ...]  # -1 where the leader never learned it
    leader_recovered: bool = False


def validate_alter_partition(
    current: PartitionRegistration,
    request: AlterPartitionRequest,
    *,
    registered_broker_epochs: Mapping[int, int],
    acceptable: Collection[int],
) -> ErrorCode:
    """The controller's checks, in Kafka's order (``validateAlterPartitionData``)."""
    if registered_broker_epochs.get(request.broker_id) != request.broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    if (
        request.leader_epoch > current.leader_epoch
        or request.partition_epoch > current.partition_epoch
    ):
        return ErrorCode.NOT_CONTROLLER
    if request.leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if request.broker_id != current.leader:
        return ErrorCode.INVALID_REQUEST
    if request.partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if (
        any(r not in current.replicas for r in request.new_isr)
        or current.leader not in request.new_isr
    ):
        return ErrorCode.INVALID_REQUEST
    recovering = (
        current.leader_recovery_state is LeaderRecoveryState.RECOVERING
        and not request.leader_recovered
    )
    if recovering and len(request.new_isr) > 1:
        return ErrorCode.INVALID_REQUEST
    for replica, epoch in zip(request.new_isr, request.new_isr_broker_epochs, strict=True):
        if replica not in acceptable:
            return ErrorCode.INELIGIBLE_REPLICA
        if epoch != -1 and registered_broker_epochs.get(replica) != epoch:
            return ErrorCode.INELIGIBLE_REPLICA
    return ErrorCode.NONE


def apply_alter_partition(
    current: PartitionRegistration,
    request: AlterPartitionRequest,
    *,
    min_insync_replicas: int | None = None,
) -> PartitionRegistration:
    """The accepted proposal as the next registration (leader epoch unchanged). With ELR
    (``min_insync_replicas`` given) members the leader drops below min ISR join the ELR, and
    the ELR empties once the ISR is back at min ISR (Kafka runs AlterPartition through the same
    ``PartitionChangeBuilder``)."""
    recovery = current.leader_recovery_state
    if request.leader_recovered:
        recovery = LeaderRecoveryState.RECOVERED
    isr = tuple(r for r in current.replicas if r in request.new_isr)
    elr: tuple[int, ...] = ()
    if min_insync_replicas is not None:
        elr = _target_elr(current, isr, min_insync_replicas, ())
    return replace(
        current,
        isr=isr,
        partition_epoch=current.partition_epoch + 1,
        leader_recovery_state=recovery,
        elr=elr,
        last_known_elr=(),
    )
