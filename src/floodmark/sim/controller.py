"""The simulated controller: registrations, heartbeats, fencing, elections and ISR changes.

It keeps one ``PartitionRegistration`` and changes it only through the core's pure builder
(``floodmark.replication.election``): clean election from the ISR, unclean only when enabled,
AlterPartition as compare-and-set on the partition epoch, broker epochs per registration.

* A broker that misses heartbeats for ``session_timeout_ms`` is fenced: removed from the ISR
  (never emptying it) and, if it led, replaced by the first live ISR member.
* A broker that re-registers after a power loss (it reports lost unflushed data) is removed from
  the ISR like a fenced one (KIP-966's unclean-shutdown rule). A restart after a plain process
  kill keeps its ISR membership; if it was the leader it is re-elected with a new leader epoch
  (a new incarnation never continues its predecessor's epoch).
* Every change is pushed to all registered brokers; heartbeat replies carry it again, so a lost
  push is repaired within a heartbeat.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from floodmark.errors import ErrorCode
from floodmark.replication.election import (
    ElectionKind,
    PartitionRegistration,
    apply_alter_partition,
    build_change,
    bump_leader_epoch,
    validate_alter_partition,
)
from floodmark.sim import messages as m

if TYPE_CHECKING:
    from floodmark.sim.cluster import Cluster

NAME = "controller"


class SimController:
    def __init__(self, cluster: Cluster, replicas: tuple[int, ...]) -> None:
        self.cluster = cluster
        self.world = cluster.world
        self.net = cluster.net
        self.config = cluster.config
        self.registration = PartitionRegistration.initial(replicas, ())
        self.registration = replace(self.registration, isr=replicas, leader=replicas[0])
        self.broker_epochs: dict[int, int] = {}
        self.last_heartbeat_ms: dict[int, int] = {}
        self.fenced: set[int] = set(replicas)
        self.next_broker_epoch = 1
        self.ever_registered: set[int] = set()
        self.incarnation_of: dict[int, int] = {}
        self.unclean_elections = 0
        self.history: list[PartitionRegistration] = [self.registration]
        self.net.add_node(NAME, self.on_message)
        if self.config.autonomous:
            self.world.schedule(self.config.heartbeat_interval_ms, self._session_tick)

    # -- views --------------------------------------------------------------------------------
    @property
    def acceptable(self) -> set[int]:
        return {b for b in self.broker_epochs if b not in self.fenced}

    def metadata(self) -> m.Metadata:
        return m.Metadata(
            self.registration,
            tuple(sorted(self.broker_epochs.items())),
            frozenset(self.fenced),
        )

    # -- changes ------------------------------------------------------------------------------
    def _commit(self, registration: PartitionRegistration, why: str) -> None:
        old = self.registration
        self.registration = registration
        self.history.append(registration)
        name = self.cluster.name_of
        self.world.record(
            f"controller {why}: leader={name(registration.leader)} epoch={registration.leader_epoch} "
            f"isr={[name(r) for r in registration.isr]} partition_epoch={registration.partition_epoch}"
            + (f" elr={[name(r) for r in registration.elr]}" if registration.elr else "")
        )
        if registration.leader != old.leader or registration.leader_epoch != old.leader_epoch:
            self.cluster.on_election(registration)
        self.broadcast()

    def broadcast(self) -> None:
        md = self.metadata()
        for broker_id in self.broker_epochs:
            self.net.send(NAME, self.cluster.name_of(broker_id), md)

    def reelect(
        self,
        why: str,
        target_isr: tuple[int, ...] | None = None,
        unclean_shutdown: tuple[int, ...] = (),
    ) -> None:
        cfg = self.config
        change = build_change(
            self.registration,
            target_isr=target_isr,
            acceptable=self.acceptable,
            unclean_leader_election_enable=cfg.unclean_leader_election_enable,
            min_insync_replicas=cfg.min_insync_replicas if cfg.eligible_leader_replicas else None,
            unclean_shutdown=unclean_shutdown,
        )
        if change is None:
            if target_isr is None:
                return
            self.broadcast()
            return
        if change.election is ElectionKind.UNCLEAN:
            self.unclean_elections += 1
            why += " (UNCLEAN election)"
        self._commit(change.registration, why)

    def fence(self, broker_id: int, why: str = "fenced") -> None:
        if broker_id in self.fenced:
            return
        self.fenced.add(broker_id)
        isr = tuple(r for r in self.registration.isr if r != broker_id)
        self.reelect(f"{why} {self.cluster.name_of(broker_id)}", isr)

    def unfence(self, broker_id: int) -> None:
        if broker_id not in self.fenced or broker_id not in self.broker_epochs:
            return
        self.fenced.discard(broker_id)
        self.world.record(f"controller unfenced {self.cluster.name_of(broker_id)}")
        self.reelect(f"{self.cluster.name_of(broker_id)} unfenced")
        self.broadcast()

    def move_leadership(self) -> bool:
        """A graceful leader change to the next live ISR member (e.g. preferred election)."""
        reg = self.registration
        candidates = [r for r in reg.isr if r != reg.leader and r in self.acceptable]
        if not candidates:
            return False
        new = replace(
            reg,
            leader=candidates[0],
            leader_epoch=reg.leader_epoch + 1,
            partition_epoch=reg.partition_epoch + 1,
        )
        self._commit(new, "leadership moved")
        return True

    def bump_epoch(self, why: str = "leader epoch bumped") -> None:
        self._commit(bump_leader_epoch(self.registration), why)

    # -- messages -----------------------------------------------------------------------------
    def on_message(self, src: str, message: Any) -> None:
        if isinstance(message, m.Heartbeat):
            self._on_heartbeat(src, message)
        elif isinstance(message, m.Register):
            self._on_register(src, message)
        elif isinstance(message, m.AlterPartition):
            self._on_alter_partition(src, message)
        elif isinstance(message, m.MetadataRequest):
            self.net.send(NAME, src, self.metadata())
        else:
            raise TypeError(f"controller: unexpected message {message!r}")
        self.cluster.after_controller_event()

    def _on_register(self, src: str, msg: m.Register) -> None:
        broker = msg.broker_id
        if self.incarnation_of.get(broker) == msg.incarnation:
            # A retried registration of an incarnation we already know: same answer.
            self.net.send(
                NAME,
                src,
                m.RegisterReply(
                    broker, msg.incarnation, self.broker_epochs[broker], self.metadata()
                ),
            )
            return
        self.incarnation_of[broker] = msg.incarnation
        epoch = self.next_broker_epoch
        self.next_broker_epoch += 1
        self.broker_epochs[broker] = epoch
        self.last_heartbeat_ms[broker] = self.world.now_ms
        self.fenced.discard(broker)
        name = self.cluster.name_of(broker)
        self.world.record(
            f"controller registered {name} broker_epoch={epoch} lost_data={msg.lost_data}"
        )
        reg = self.registration
        first_registration = broker not in self.ever_registered
        self.ever_registered.add(broker)
        if (
            msg.lost_data
            and (broker in reg.isr or broker in reg.elr)
            and self.config.remove_unclean_from_isr
        ):
            self.reelect(
                f"{name} restarted after losing unflushed data",
                tuple(r for r in reg.isr if r != broker),
                unclean_shutdown=(broker,),
            )
        elif reg.leader == broker and not first_registration:
            self.bump_epoch(f"{name} re-registered as leader")
        else:
            self.reelect(f"{name} registered")
        self.net.send(NAME, src, m.RegisterReply(broker, msg.incarnation, epoch, self.metadata()))

    def _on_heartbeat(self, src: str, msg: m.Heartbeat) -> None:
        if self.broker_epochs.get(msg.broker_id) != msg.broker_epoch:
            return  # an older incarnation
        self.last_heartbeat_ms[msg.broker_id] = self.world.now_ms
        if msg.broker_id in self.fenced:
            self.unfence(msg.broker_id)
        self.net.send(NAME, src, m.HeartbeatReply(self.metadata()))

    def _session_tick(self) -> None:
        now = self.world.now_ms
        for broker in sorted(self.broker_epochs):
            if broker in self.fenced:
                continue
            if now - self.last_heartbeat_ms.get(broker, 0) > self.config.session_timeout_ms:
                self.fence(broker, "session expired:")
        self.cluster.after_controller_event()
        self.world.schedule(self.config.heartbeat_interval_ms, self._session_tick)

    def _on_alter_partition(self, src: str, msg: m.AlterPartition) -> None:
        request = msg.request
        error = validate_alter_partition(
            self.registration,
            request,
            registered_broker_epochs=self.broker_epochs,
            acceptable=self.acceptable,
        )
        registration: PartitionRegistration | None = None
        if error is ErrorCode.NONE:
            registration = apply_alter_partition(self.registration, request)
            self._commit(registration, f"AlterPartition from {src}")
        self.net.send(NAME, src, m.AlterPartitionReply(request, error, registration))
