"""The controller's settings and startup, one copy for both ways to run it.

``python -m floodmark.controller`` (a controller process, ``process.roles=controller``) and
``python -m floodmark.broker.cluster_member --controller-data-dir ...`` (combined mode,
``process.roles=broker,controller``) take the same controller options from
``add_controller_arguments``, turn them into settings with ``controller_setup`` (a bad value is
one ``ValueError`` line), and open and serve the controller with ``open_controller`` and
``start_controller``: the same ``ControllerServer`` (alone, or one voter of a KIP-595 quorum),
the same data-dir lock, the same "listening" line.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from floodmark import features
from floodmark.address import format_host_port, parse_host_port
from floodmark.controller.logic import ControllerConfig, elr_config
from floodmark.controller.metadata_log import MetadataLogConfig
from floodmark.controller.quorum.codec import parse_voters
from floodmark.controller.quorum.core import QuorumConfig
from floodmark.security import PLAINTEXT_CHANNEL, ChannelSecurity, ScramUser, parse_add_scram
from floodmark.settings import DEFAULTS, SETTINGS, eligible_leader_replicas_enabled
from floodmark.storage import DataDirLock, lock_data_dir

if TYPE_CHECKING:  # loaded by open_controller: a broker-only node takes the options, not the server
    from floodmark.controller.server import ControllerServer

FETCH_IDLE_BACKOFF_MS = 0  # the leader long-polls caught-up voters (quorum_node)

Voters = dict[int, tuple[str, int]]


def parse_bool(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _elr_version(text: str) -> int:
    try:
        eligible_leader_replicas_enabled(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return int(SETTINGS["eligible.leader.replicas.version"].parse(text))


def _min_isr(text: str) -> int:
    try:
        value = int(SETTINGS["min.insync.replicas"].parse(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"Invalid value {text} for configuration "
                                         f"min.insync.replicas: Value must be at least 1")
    return value


def _add_scram(text: str) -> ScramUser:
    try:
        return parse_add_scram(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_controller_arguments(p: argparse.ArgumentParser) -> None:
    """Every controller setting, with Kafka's names as flags (``controller.quorum.voters`` is
    ``--controller-quorum-voters``)."""
    defaults = ControllerConfig()
    p.add_argument("--broker-session-timeout-ms", type=int,
                   default=defaults.broker_session_timeout_ms)
    p.add_argument("--unclean-leader-election-enable", type=parse_bool,
                   default=defaults.unclean_leader_election_enable)
    p.add_argument("--auto-leader-rebalance-enable", type=parse_bool,
                   default=defaults.auto_leader_rebalance_enable)
    p.add_argument("--leader-imbalance-check-interval-ms", type=int,
                   default=defaults.leader_imbalance_check_interval_ms)
    p.add_argument("--eligible-leader-replicas-version", type=_elr_version, default=None,
                   metavar="0|1",
                   help="KIP-966 eligible leader replicas and the unclean-shutdown rule: 1 on "
                        "(the default, as Kafka 4.1+ for new clusters), 0 off")
    p.add_argument("--min-insync-replicas", type=_min_isr, default=None,
                   help="the cluster's min.insync.replicas (the brokers' setting; topics may "
                        "override it): the ISR size below which leavers join the ELR")
    p.add_argument("--controller-quorum-voters", default=None, metavar="ID@HOST:PORT,...",
                   help="Kafka's controller.quorum.voters: run as one voter of this quorum "
                        "(--node-id must be one of them; one voter is valid)")
    quorum = QuorumConfig(0, (0,))
    p.add_argument("--controller-quorum-election-timeout-ms", type=int,
                   default=quorum.election_timeout_ms)
    p.add_argument("--controller-quorum-fetch-timeout-ms", type=int,
                   default=quorum.fetch_timeout_ms)
    p.add_argument("--controller-quorum-election-backoff-max-ms", type=int,
                   default=quorum.election_backoff_max_ms)
    p.add_argument("--controller-quorum-request-timeout-ms", type=int,
                   default=quorum.request_timeout_ms)
    p.add_argument("--add-scram", action="append", default=[], type=_add_scram,
                   metavar="MECHANISM=[name=N,password=P]",
                   help="a SCRAM user the cluster starts with, in kafka-storage format's syntax "
                        "(e.g. SCRAM-SHA-512=[name=admin,password=admin-secret]); only a new "
                        "metadata log takes it (repeatable)")
    features.add_feature_arguments(p)
    mlog = MetadataLogConfig()
    p.add_argument("--metadata-log-segment-bytes", type=int, default=mlog.segment_bytes)
    p.add_argument("--metadata-log-max-record-bytes-between-snapshots", type=int,
                   default=mlog.max_record_bytes_between_snapshots,
                   help="snapshot the metadata image after this many committed record bytes "
                        "(KIP-630; 0: never)")


@dataclass(frozen=True, slots=True)
class ControllerSetup:
    """What ``add_controller_arguments``' options say, checked."""

    node_id: int
    config: ControllerConfig
    metadata_log: MetadataLogConfig
    quorum: tuple[QuorumConfig, Voters] | None = None  # settings, controller.quorum.voters
    security: ChannelSecurity = PLAINTEXT_CHANNEL
    """The controller channel's TLS (``controller.listener.names`` & ``ssl.*``)."""

    @property
    def voter_addresses(self) -> list[str]:
        """Every voter's ``host:port`` in id order (what a broker is given to find the active
        controller); empty without a quorum."""
        return [] if self.quorum is None else voter_addresses(self.quorum[1])

    @property
    def own_address(self) -> tuple[str, int] | None:
        """Where this voter listens (the voter set names it), or None without a quorum or
        for an observer outside it."""
        return None if self.quorum is None else self.quorum[1].get(self.node_id)


def voter_addresses(voters: Voters) -> list[str]:
    """The voters' ``host:port`` in id order: what a broker is given to find the active
    controller (``controller.quorum.voters`` is all a Kafka broker needs, too)."""
    return [format_host_port(*voters[v]) for v in sorted(voters)]


def controller_setup(args: argparse.Namespace, node_id: int,
                     settings: Callable[[str], Any] | None = None, *,
                     observer: bool = False) -> ControllerSetup:
    """The controller's settings from the parsed options; ValueError (one line) on a bad one.
    ``settings``: where ``eligible.leader.replicas.version`` and ``min.insync.replicas`` come
    from when no flag gives them (combined mode: the node's own broker settings), else the
    registry's defaults."""
    def lookup(name: str) -> Any:
        value = settings(name) if settings is not None else None
        return DEFAULTS[name] if value is None else value

    elr_version = args.eligible_leader_replicas_version
    if elr_version is None:
        elr_version = lookup("eligible.leader.replicas.version")
    min_isr = args.min_insync_replicas
    if min_isr is None:
        min_isr = int(lookup("min.insync.replicas"))
    if args.broker_session_timeout_ms <= 0:
        raise ValueError(f"--broker-session-timeout-ms {args.broker_session_timeout_ms}: must be "
                         "positive")
    if args.metadata_log_segment_bytes < 1024 or args.metadata_log_max_record_bytes_between_snapshots < 0:
        raise ValueError("--metadata-log-segment-bytes must be at least 1024 and "
                         "--metadata-log-max-record-bytes-between-snapshots not negative")
    config = ControllerConfig(
        broker_session_timeout_ms=args.broker_session_timeout_ms,
        unclean_leader_election_enable=args.unclean_leader_election_enable,
        auto_leader_rebalance_enable=args.auto_leader_rebalance_enable,
        leader_imbalance_check_interval_ms=args.leader_imbalance_check_interval_ms,
        **elr_config(eligible_leader_replicas_enabled(elr_version), min_isr),
        bootstrap_scram=tuple(args.add_scram),
        bootstrap_features=features.bootstrap_features(args),
    )
    mlog = MetadataLogConfig(args.metadata_log_segment_bytes,
                             args.metadata_log_max_record_bytes_between_snapshots)
    quorum: tuple[QuorumConfig, Voters] | None = None
    if args.controller_quorum_voters:
        voters = parse_voters(args.controller_quorum_voters)
        if node_id not in voters and not observer:
            # A controller outside the bootstrap voter set is an observer until AddRaftVoter
            # (KIP-853); it needs its own listener (``--listen``), which the list cannot give.
            raise ValueError(f"node {node_id} is not one of the voters {sorted(voters)} (an "
                             "observer controller needs --listen HOST:PORT)")
        quorum = (QuorumConfig(
            node_id, tuple(sorted(voters)),
            election_timeout_ms=args.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=args.controller_quorum_fetch_timeout_ms,
            election_backoff_max_ms=args.controller_quorum_election_backoff_max_ms,
            request_timeout_ms=args.controller_quorum_request_timeout_ms,
            fetch_idle_backoff_ms=FETCH_IDLE_BACKOFF_MS), voters)
    security = ChannelSecurity.from_settings(settings if settings is not None
                                             else lambda _name: None)
    return ControllerSetup(node_id, config, mlog, quorum, security)


def open_controller(setup: ControllerSetup, data_dir: str
                    ) -> tuple[ControllerServer, DataDirLock]:
    """Lock the data dir (held until the process ends or ``release``), then load the controller
    from it. ``DataDirLockedError`` / ``OSError`` when the directory is taken or unusable."""
    from floodmark.controller.server import ControllerServer

    lock = lock_data_dir(data_dir)
    try:
        server = ControllerServer(data_dir, setup.config, setup.node_id, setup.quorum,
                                  setup.metadata_log, setup.security)
    except BaseException:
        lock.release()
        raise
    return server, lock


async def start_controller(server: ControllerServer, listen: str
                           ) -> tuple[asyncio.Task[None], str]:
    """Serve the controller on ``listen`` (``host:port``, port 0: any) until its ``stop``;
    returns the serving task and the bound ``host:port`` once it listens, after printing
    ``floodmark controller listening on HOST:PORT`` (what supervisors wait for)."""
    host, port = parse_host_port(listen, what="controller listen address")
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def ready(bound_port: int) -> None:
        if not bound.done():
            bound.set_result(bound_port)

    def ended(task: asyncio.Task[None]) -> None:
        if not bound.done():  # serve ended before listening (e.g. the address is in use)
            exc = None if task.cancelled() else task.exception()
            bound.set_exception(exc or OSError(f"controller stopped before listening on "
                                               f"{listen}"))

    task = asyncio.create_task(server.serve(host, port, ready))
    task.add_done_callback(ended)
    await bound
    address = format_host_port(host, bound.result())
    print(f"floodmark controller listening on {address}", flush=True)
    return task, address
