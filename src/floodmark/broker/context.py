"""What the parts of a broker see of it: request handlers (``HandlerContext``) and its membership
of a cluster (``MemberHost``). Narrow views, so handlers and memberships depend on these, not on
``broker.broker`` (which imports them).

One ``Broker`` serves a lone node and a cluster member alike; what differs is carried by what it
is given (``Membership``: its controller and how it joins, learns metadata and leaves;
``ReplicaManager``: replication over the wire, for a cluster member), never by a subclass.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from floodmark.broker.boundary import ClientConnection, HandlerResult, WireRequest
from floodmark.broker.config import BrokerConfig, Configs
from floodmark.broker.fetch_sessions import FetchSessionCache
from floodmark.broker.metadata import Controller
from floodmark.broker.partition_state import PartitionState
from floodmark.broker.produce_order import TxnProduces
from floodmark.broker.purgatory import FetchPurgatory
from floodmark.broker.replica_fetcher import ReplicaManager
from floodmark.broker.storage_glue import LogDir, Storage
from floodmark.errors import ErrorCode
from floodmark.metadata import CoordinatorType, TopicMeta
from floodmark.replication import AlterPartitionRequest, Partition, ProduceSettings
from floodmark.security import Endpoint
from floodmark.storage import Log
from floodmark.wire import RequestHeader

if TYPE_CHECKING:  # only named here: imported where they are built (``broker.broker``)
    from floodmark.broker.authentication import Authentication
    from floodmark.broker.groups import GroupCoordinator
    from floodmark.broker.quotas import ClientQuotas
    from floodmark.broker.share_group.driver import ShareGroups
    from floodmark.broker.share_group.state_service import ShareStateService
    from floodmark.broker.topic_metrics import BrokerTopicMetrics
    from floodmark.broker.txn_coordinator import BrokerTxnCoordinator
    from floodmark.groups import ConsumerGroupCoordinator, OffsetStore
    from floodmark.metrics import RequestMetrics

PartitionKey = tuple[str, int]


class BrokerInfo(TypedDict):
    """A broker as Metadata and DescribeCluster list it."""

    node_id: int
    host: str
    port: int
    rack: str | None


class Membership(Protocol):
    """How a broker belongs to its cluster: a lone node runs its own controller in process
    (``membership.LocalMembership``), a cluster member talks to the controller quorum
    (``cluster_member.ClusterMembership``)."""

    @property
    def controller(self) -> Controller: ...

    def attach(self, host: MemberHost) -> None:
        """The broker this membership is of (called once, by the broker's constructor)."""

    def open(self) -> None:
        """At start, before serving: open what this node hosts."""

    def metadata_changed(self) -> None:
        """This broker changed metadata through ``controller`` (created a topic, added
        partitions): open what it now hosts."""

    def start(self, port: int, ready: Callable[[int], None] | None) -> None:
        """The listener is bound to ``port``: join the cluster, then call ``ready``."""

    async def leave(self) -> None:
        """Shutting down, still serving: hand leadership over (controlled shutdown)."""

    def stop(self) -> None:
        """Shutting down: end the membership's loops."""

    def close(self) -> None:
        """The logs are closed: release what is left."""

    def propose_isr(self, key: PartitionKey, request: AlterPartitionRequest) -> None:
        """Send a leader's ISR proposal to the controller (AlterPartition)."""

    def live_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """The brokers clients may talk to (Metadata, DescribeCluster), at their endpoints of
        listener ``listener_name`` (the one the request came in on; a broker without that
        listener is left out, as Kafka does); None: the inter-broker listener."""

    def listed_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """The brokers a Metadata answer lists: the live ones, and one fenced a moment ago
        (``cluster_member.FENCED_BROKER_LISTED_MS``)."""

    def fenced_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]:
        """Registered brokers the controller has fenced, at their endpoints of
        ``listener_name`` (DescribeCluster v2's ``include_fenced_brokers``, KIP-1073)."""

    def coordinator_for(self, key: str, key_type: CoordinatorType = CoordinatorType.GROUP
                        ) -> int:
        """The node id coordinating ``key``, a group, a transactional id or a share
        partition (-1: none available); creates the internal topic on first use."""

    def broker_address(self, node_id: int,
                       listener_name: str | None = None) -> tuple[str, int] | None:
        """Where clients of ``listener_name`` reach broker ``node_id`` (None: the
        inter-broker listener) (None: not a live broker, or not on that listener)."""

    def leadership_in_doubt(self) -> bool:
        """The controller may have moved this broker's partitions without its knowing
        (``replication.controller_session.ControllerSession``)."""

    def steps_down(self, core: Partition, now_ms: int) -> bool:
        """``core`` leads in this broker's metadata but must answer clients as a non-leader:
        its leadership is in doubt and nothing says it still leads (``replication.lease``)."""

    async def metadata_ready(self, timeout_s: float) -> bool:
        """Wait until this broker has caught up with the cluster's metadata once after its
        start (SCRAM credentials and ACLs are metadata); False if ``timeout_s`` passed first."""

    def metadata_caught_up(self) -> bool:
        """Has this broker caught up with the cluster's metadata once since its start?"""


class BrokerCore(Protocol):
    """What every part sees of the broker: its settings, controller, storage and partitions."""

    node_id: int
    config: BrokerConfig
    controller: Controller
    storage: Storage
    partitions: dict[PartitionKey, PartitionState]

    def now_ms(self) -> int: ...
    def reconfigure_partition(self, ps: PartitionState, configs: Configs, *,
                              force: bool = False) -> None: ...


class MemberHost(BrokerCore, Protocol):
    """What a membership sees of its broker."""

    @property
    def offsets(self) -> OffsetStore: ...
    @property
    def transactions(self) -> BrokerTxnCoordinator: ...
    purgatory: FetchPurgatory
    replicas: ReplicaManager | None
    isr_shrinks: int
    isr_expands: int
    metadata_apply_errors: int
    offsets_loaded: dict[int, int]

    @property
    def closing(self) -> bool: ...
    def advertised_endpoint(self, name: str) -> Endpoint | None: ...
    def advertised_endpoints(self) -> list[Endpoint]: ...
    def load_offsets_partition(self, ps: PartitionState) -> None: ...
    def unload_offsets_partition(self, index: int) -> None: ...
    def refresh_share_state(self) -> None: ...
    def apply_group_configs(self) -> None: ...
    def refresh_transactions(self) -> None: ...
    @property
    def advertised(self) -> tuple[str, int]: ...
    def stop(self) -> None: ...
    def open_partition(self, topic: str, index: int, configs: Configs,
                       topic_id: uuid.UUID | None = None) -> PartitionState: ...
    def adopt_partition(self, topic: str, index: int, configs: Configs, plog: Log,
                        hw: int) -> PartitionState: ...
    def remove_partition(self, key: PartitionKey, *, delete: bool) -> PartitionState | None: ...


class MembershipBase:
    """The plumbing every membership shares: the broker it is of, attached once by the
    broker's constructor."""

    _host: MemberHost | None = None

    def attach(self, host: MemberHost) -> None:
        self._host = host

    async def metadata_ready(self, timeout_s: float) -> bool:
        """A membership whose metadata is there from the start (a lone node's own controller):
        ready at once."""
        return True

    def metadata_caught_up(self) -> bool:
        return True

    @property
    def host(self) -> MemberHost:
        if self._host is None:
            raise RuntimeError("the membership is not attached to a broker yet")
        return self._host


class HandlerContext(BrokerCore, Protocol):
    """What request handlers (``broker/handlers``) see of the broker."""

    data_dir: Path
    membership: Membership
    replicas: ReplicaManager | None
    purgatory: FetchPurgatory
    fetch_sessions: FetchSessionCache
    @property
    def offsets(self) -> OffsetStore: ...
    @property
    def groups(self) -> GroupCoordinator: ...
    @property
    def consumer_groups(self) -> ConsumerGroupCoordinator: ...
    @property
    def share_groups(self) -> ShareGroups: ...
    @property
    def share_groups_enabled(self) -> bool: ...
    @property
    def share_state(self) -> ShareStateService: ...  # the share coordinator (__share_group_state)
    @property
    def transactions(self) -> BrokerTxnCoordinator: ...
    txn_produces: TxnProduces  # transactional Produce through verification, in order
    authentication: Authentication
    quotas: ClientQuotas
    # /metrics on: counted where answers are built (None: off)
    request_metrics: RequestMetrics | None
    topic_metrics: BrokerTopicMetrics | None

    bound_ports: dict[str, int]

    @property
    def advertised(self) -> tuple[str, int]: ...
    def advertised_endpoints(self) -> list[Endpoint]: ...
    def live_brokers(self, listener_name: str | None = None) -> list[BrokerInfo]: ...
    def is_coordinator(self, group: str) -> bool: ...
    def coordinator_error(self, group: str) -> ErrorCode: ...
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: Configs, *, validate_only: bool = False,
                           assignments: list[tuple[int, ...]] | None = None) -> TopicMeta: ...
    async def delete_topic(self, name: str) -> TopicMeta: ...
    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                                assignments: list[tuple[int, ...]] | None = None) -> None: ...
    async def alter_topic_configs(self, name: str, configs: Configs, *,
                                  validate_only: bool = False) -> None: ...
    def produce_settings(self, ps: PartitionState) -> ProduceSettings: ...
    def next_produce_id(self) -> int: ...
    def move_replica(self, key: PartitionKey, destination: LogDir) -> None: ...
    def park_produce(self, produce_id: int) -> asyncio.Future[tuple[ErrorCode, int]]: ...


Handler = Callable[[HandlerContext, RequestHeader, WireRequest, ClientConnection], HandlerResult]
"""A request handler of the table (``broker.handlers.HANDLERS``)."""
