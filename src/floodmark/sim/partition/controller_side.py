"""A simulated broker's side of its controller: registration and heartbeats over the simulated
network, the metadata they bring applied through the node, ISR proposals sent (and sent again
while pending), and the lease on the session they keep.

No rule lives here: the session and when leadership is in doubt are
``replication.controller_session``'s, stepping down for clients ``replication.lease``'s (through
``ReplicaDriver.check_lease``, as the broker's ``_lease_checks``), what metadata and an
AlterPartition answer mean ``ReplicaDriver.apply_metadata`` / ``on_alter_partition_response``,
and whether a proposal is still open ``Partition.is_proposal_pending``. This sends and receives
the messages and keeps what the broker knows of its controller: its broker epoch and the last
metadata it applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from floodmark.replication import (
    AlterPartitionRequest,
    ControllerSession,
    Partition,
    ReplicaDriver,
    lease,
)
from floodmark.sim.network import Network
from floodmark.sim.partition import messages as m
from floodmark.sim.partition.config import SimConfig
from floodmark.sim.partition.follower_side import FollowerSide
from floodmark.sim.world import World

Timer = Callable[..., None]
"""``SimBroker._timer``: (delay_ms, fn, *args), run in the broker's incarnation."""


class ControllerHost(Protocol):
    """What the controller side sees of its broker (``broker.SimBroker``)."""

    name: str
    world: World
    net: Network
    config: SimConfig
    broker_id: int
    incarnation: int
    partition: Partition | None
    driver: ReplicaDriver | None
    follower: FollowerSide | None


class ControllerSide:
    """It outlives incarnations (a power loss is told at the next registration); ``start``
    begins each one's session."""

    def __init__(self, host: ControllerHost, timer: Timer, name_of: Callable[[int], str],
                 became_leader: Callable[[int], None]) -> None:
        """``became_leader(leader_epoch)``: the metadata made this broker the leader."""
        self.host = host
        self.timer = timer
        self.name_of = name_of
        self.became_leader = became_leader
        self.broker_epoch = -1  # until the controller answers this incarnation's registration
        self.last_metadata: m.Metadata | None = None
        # A power loss is reported as an unclean shutdown on re-registration (KIP-966 style):
        # the controller then removes this broker from the ISR. A process kill is not.
        self.lost_data_on_crash = False
        # The broker's side of its controller session (autonomous worlds only: a scripted one
        # sends no heartbeats); ``replication.lease`` steps a leader down for clients on it.
        self.session = ControllerSession(session_timeout_ms=host.config.session_timeout_ms)
        self.stepped_down = False

    def start(self) -> None:
        """A new incarnation registers (and, in an autonomous world, heartbeats from now)."""
        cfg = self.host.config
        self.last_metadata = None
        self.broker_epoch = -1
        self.session = ControllerSession(session_timeout_ms=cfg.session_timeout_ms)
        self.stepped_down = False
        self._register()
        if cfg.autonomous:
            self.timer(cfg.heartbeat_interval_ms, self._heartbeat_tick)

    def _send(self, message: object) -> None:
        self.host.net.send(self.host.name, "controller", message)

    def _register(self) -> None:
        host = self.host
        self._send(m.Register(host.broker_id, host.incarnation, self.lost_data_on_crash,
                              host.world.now_ms))

    def _heartbeat_tick(self) -> None:
        self._lease_check()
        host = self.host
        if self.broker_epoch >= 0:
            self._send(m.Heartbeat(host.broker_id, self.broker_epoch, host.world.now_ms))
        else:  # the registration (or its answer) was lost: register again
            self._register()
        self.timer(host.config.heartbeat_interval_ms, self._heartbeat_tick)

    # -- the lease -------------------------------------------------------------------------------
    def steps_down(self) -> bool:
        """``replication.lease``: this broker leads in its metadata but its controller session
        lapsed and no follower follows it: clients are answered NOT_LEADER_OR_FOLLOWER."""
        host = self.host
        if host.partition is None or not host.config.step_down_on_lapse:
            return False
        now = host.world.now_ms
        return lease.steps_down(
            host.partition, now, in_doubt=self.session.leadership_in_doubt(now, 0),
            session_timeout_ms=self.session.session_timeout_ms)

    def _lease_check(self) -> None:
        """The lease check the broker runs too (``ReplicaDriver.check_lease``)."""
        host = self.host
        if host.driver is None or not host.config.step_down_on_lapse:
            return
        now = host.world.now_ms
        down = host.driver.check_lease(now, in_doubt=self.session.leadership_in_doubt(now, 0),
                                       session_timeout_ms=self.session.session_timeout_ms)
        if down != self.stepped_down:
            self.stepped_down = down
            host.world.record(f"{host.name} steps down for clients (controller session lapsed)"
                              if down else f"{host.name} no longer steps down for clients")

    # -- answers and metadata --------------------------------------------------------------------
    def on_register_reply(self, msg: m.RegisterReply) -> None:
        host = self.host
        if msg.incarnation != host.incarnation:
            return
        self.broker_epoch = msg.broker_epoch
        assert host.partition is not None
        host.partition.local_broker_epoch = msg.broker_epoch
        if host.config.autonomous:
            self.session.registered(msg.sent_ms)
        self.lost_data_on_crash = False
        self.apply_metadata(msg.metadata)

    def on_heartbeat_reply(self, msg: m.HeartbeatReply) -> None:
        if self.host.config.autonomous and self.broker_epoch >= 0:
            # The sim's metadata rides on the answer: nothing to catch up on (end 0).
            self.session.heartbeat_answered(msg.sent_ms, self.host.world.now_ms,
                                            stale_epoch=False, metadata_end=0)
        self.apply_metadata(msg.metadata)

    def apply_metadata(self, md: m.Metadata) -> None:
        host = self.host
        p, driver = host.partition, host.driver
        assert p is not None and driver is not None
        if md == self.last_metadata or self.broker_epoch < 0:
            return
        self.last_metadata = md
        before = (p.leader_id, p.leader_epoch)
        driver.apply_metadata(md.registration, host.world.now_ms,
                              broker_epochs=dict(md.broker_epochs), ineligible=md.fenced)
        after = (p.leader_id, p.leader_epoch)
        if after != before:
            role = "leader" if p.is_leader else f"follower of {self.name_of(p.leader_id)}"
            host.world.record(f"{host.name} becomes {role} epoch={p.leader_epoch}")
        if p.is_leader and after != before:
            self.became_leader(p.leader_epoch)
        assert host.follower is not None
        host.follower.on_metadata()

    def on_metadata_request(self, src: str) -> None:
        """Clients learn the leader from any broker, which answers from the metadata it has
        applied: a broker cut off from the controller still names itself (a stale answer that
        clients only take while they know no newer leader epoch)."""
        if self.last_metadata is not None:
            self.host.net.send(self.host.name, src, self.last_metadata)

    # -- ISR proposals ---------------------------------------------------------------------------
    def propose_isr(self, request: AlterPartitionRequest) -> None:
        self.host.world.record(f"{self.host.name} propose ISR {list(request.new_isr)}")
        self._send_alter_partition(request)

    def _send_alter_partition(self, request: AlterPartitionRequest) -> None:
        """Send an ISR proposal; resend it while it is still pending after a request timeout
        (the request or its answer may be lost; a duplicate is answered INVALID_UPDATE_VERSION and
        the metadata push then settles the state)."""
        self._send(m.AlterPartition(request))
        if self.host.config.autonomous:
            self.timer(self.host.config.request_timeout_ms, self._retry_alter_partition,
                       request)

    def _retry_alter_partition(self, request: AlterPartitionRequest) -> None:
        host = self.host
        if host.partition is not None and host.partition.is_proposal_pending(request):
            host.world.record(f"{host.name} resend AlterPartition {list(request.new_isr)}")
            self._send_alter_partition(request)

    def on_alter_partition_reply(self, msg: m.AlterPartitionReply) -> None:
        host = self.host
        assert host.driver is not None
        host.world.record(
            f"{host.name} AlterPartition {list(msg.request.new_isr)} -> {msg.error.name}")
        host.driver.on_alter_partition_response(msg.request, msg.error, msg.registration,
                                                host.world.now_ms)
