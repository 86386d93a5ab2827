"""The simulated controller: the real ``ControllerLogic`` behind the simulated network.

Nothing here decides anything. Registrations, heartbeats, session expiry, fencing, elections and
AlterPartition go to ``floodmark.controller.logic.ControllerLogic`` over a ``MetadataImage``,
the same code the controller process runs; this adapter only turns simulated messages into its
calls and its committed records into ``Metadata`` pushes:

* every change is pushed to all registered brokers; heartbeat replies carry it again, so a lost
  push is repaired within a heartbeat (the real brokers long-poll the metadata log instead);
* the partition starts as bootstrap metadata (every replica in the ISR, the first leading at
  leader epoch 0) before any broker registers;
* simulation-only behaviour is a ``ControllerConfig`` field: the historical scenarios keep a
  restarted broker in the ISR (``new_incarnation_keeps_isr``, the ZooKeeper-era rule the seed
  stories assume); KIP-966's unclean-shutdown rule and ELR follow ``SimConfig``.

Scripts and the explorer also act as an operator would (fence a broker, move leadership): those
are ``ControllerLogic`` methods too.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol

from floodmark.controller import (
    ControllerConfig,
    ControllerLogic,
    MetadataImage,
    PartitionChangeNote,
)
from floodmark.errors import ErrorCode
from floodmark.replication import PartitionRegistration
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.world import World

NAME = "controller"
# The logic's log lines say what the trace already says (with names, in virtual time).
_QUIET = logging.getLogger("floodmark.sim.partition.controller")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
_BROKER_ID = re.compile(r"\b(broker|from) (\d+)\b")


def controller_config(config: SimConfig) -> ControllerConfig:
    """The simulation's parameters as the controller's own settings."""
    return ControllerConfig(
        broker_session_timeout_ms=config.session_timeout_ms,
        unclean_leader_election_enable=config.unclean_leader_election_enable,
        auto_leader_rebalance_enable=False,
        eligible_leader_replicas_enable=config.eligible_leader_replicas,
        min_insync_replicas=config.min_insync_replicas,
        unclean_shutdown_leaves_isr=config.remove_unclean_from_isr,
        new_incarnation_keeps_isr=config.restart_keeps_isr,
    )


class ControllerHost(Protocol):
    """What the simulated controller sees of its cluster (``cluster.Cluster``)."""

    config: SimConfig
    world: World
    net: Network

    def name_of(self, broker_id: int) -> str: ...
    def after_controller_event(self) -> None: ...


class SimController:
    def __init__(self, cluster: ControllerHost, replicas: tuple[int, ...]) -> None:
        self.cluster = cluster
        self.world = cluster.world
        self.net = cluster.net
        self.config = cluster.config
        self.topic = self.config.topic
        self.partition = self.config.partition
        self.logic = ControllerLogic(MetadataImage(), controller_config(self.config),
                                     logger=_QUIET)
        self.logic.bootstrap()
        self.logic.bootstrap_topic(
            self.topic, [replicas] * (self.partition + 1),
            {"min.insync.replicas": self.config.min_insync_replicas},
        )
        self.logic.start(self.world.now_ms)
        self.logic.take_pending()
        self.history: list[PartitionRegistration] = [self.registration]
        self.logic.on_change = self._on_change
        self.net.add_node(NAME, self.on_message)
        if self.config.autonomous:
            self.world.schedule(self.config.heartbeat_interval_ms, self._session_tick)

    # -- views --------------------------------------------------------------------------------
    @property
    def registration(self) -> PartitionRegistration:
        reg = self.logic.image.partition(self.topic, self.partition)
        assert reg is not None
        return reg

    @property
    def broker_epochs(self) -> dict[int, int]:
        return self.logic.image.broker_epochs()

    @property
    def fenced(self) -> frozenset[int]:
        return self.logic.image.ineligible()

    @property
    def acceptable(self) -> set[int]:
        return self.logic.image.acceptable_brokers()

    @property
    def last_heartbeat_ms(self) -> dict[int, int]:
        return self.logic.last_heartbeat_ms

    @property
    def unclean_elections(self) -> int:
        return self.logic.unclean_elections

    def metadata(self) -> m.Metadata:
        return m.Metadata(
            self.registration, tuple(sorted(self.broker_epochs.items())), self.fenced
        )

    # -- the logic's decisions -------------------------------------------------------------------
    def _on_change(self, note: PartitionChangeNote) -> None:
        if note.topic != self.topic or note.partition != self.partition:
            return
        reg = note.registration
        self.history.append(reg)
        name = self.cluster.name_of
        why = _BROKER_ID.sub(lambda mt: f"{mt.group(1)} {name(int(mt.group(2)))}", note.why)
        self.world.record(
            f"controller {why}: leader={name(reg.leader)} epoch={reg.leader_epoch} "
            f"isr={[name(r) for r in reg.isr]} partition_epoch={reg.partition_epoch}"
            + (f" elr={[name(r) for r in reg.elr]}" if reg.elr else "")
        )

    def _publish(self) -> None:
        """The records the logic committed become one metadata push to every broker."""
        if self.logic.take_pending():
            self.broadcast()

    def broadcast(self) -> None:
        md = self.metadata()
        for broker_id in self.broker_epochs:
            self.net.send(NAME, self.cluster.name_of(broker_id), md)

    # -- operator actions (scripts, the explorer) -------------------------------------------------
    def fence(self, broker_id: int, why: str = "fenced") -> None:
        self.logic.fence_broker(broker_id, f"{why} {self.cluster.name_of(broker_id)}")
        self._publish()

    def unfence(self, broker_id: int) -> None:
        if broker_id in self.fenced:
            self.world.record(f"controller unfenced {self.cluster.name_of(broker_id)}")
        self.logic.unfence_broker(broker_id)
        self._publish()

    def move_leadership(self) -> bool:
        """A graceful leader change to the next live ISR member (e.g. preferred election)."""
        moved = self.logic.move_leadership(self.topic, self.partition, "leadership moved")
        self._publish()
        return moved

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
        known = self.logic.image.brokers.get(msg.broker_id)
        retry = known is not None and known.incarnation == str(msg.incarnation)
        epoch = self.logic.register_broker(
            msg.broker_id, src, 0, str(msg.incarnation), self.world.now_ms,
            clean_shutdown=not msg.lost_data,
        )
        if not retry:
            self.world.record(
                f"controller registered {self.cluster.name_of(msg.broker_id)} "
                f"broker_epoch={epoch} lost_data={msg.lost_data}"
            )
        self._publish()
        self.net.send(NAME, src, m.RegisterReply(msg.broker_id, msg.incarnation, epoch,
                                                 self.metadata(), msg.sent_ms))

    def _on_heartbeat(self, src: str, msg: m.Heartbeat) -> None:
        if self.broker_epochs.get(msg.broker_id) != msg.broker_epoch:
            return  # an older incarnation
        if msg.broker_id in self.fenced:
            self.world.record(f"controller unfenced {self.cluster.name_of(msg.broker_id)}")
        self.logic.heartbeat(msg.broker_id, msg.broker_epoch, self.world.now_ms)
        self._publish()
        self.net.send(NAME, src, m.HeartbeatReply(self.metadata(), msg.sent_ms))

    def _session_tick(self) -> None:
        self.logic.tick(self.world.now_ms)
        self._publish()
        self.cluster.after_controller_event()
        self.world.schedule(self.config.heartbeat_interval_ms, self._session_tick)

    def _on_alter_partition(self, src: str, msg: m.AlterPartition) -> None:
        error, registration = self.logic.alter_partition(self.topic, self.partition, msg.request)
        self._publish()
        self.net.send(
            NAME, src,
            m.AlterPartitionReply(
                msg.request, error, registration if error is ErrorCode.NONE else None
            ),
        )
