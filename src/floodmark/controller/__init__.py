"""The controller: the KRaft-style metadata quorum (``quorum``: pure rules, effects as values,
timers in the core, one driver under the broker, the simulator and the model checker), the
controller's decisions over the metadata (registrations, ISR and leader elections, configs,
SCRAM credentials, delegation tokens) and the RPCs brokers use to reach it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.faces import face

# The face: the names other packages import from here, each loaded from its module
# the first time it is used (floodmark.faces).
if TYPE_CHECKING:
    from floodmark.controller import delegation_tokens, rpc, scram
    from floodmark.controller.client import ControllerClient
    from floodmark.controller.delegation_tokens import Decision, TokenInfo, Tokens, TokenSettings
    from floodmark.controller.image import (
        BrokerRegistration,
        MetadataImage,
        Reassignment,
        TopicImage,
        UnappliedRecord,
        record_to_registration,
        registration_to_record,
        topic_metas,
    )
    from floodmark.controller.logic import (
        ControllerConfig,
        ControllerLogic,
        PartitionChangeNote,
        elr_config,
    )
    from floodmark.controller.metadata_log import MetadataLog
    from floodmark.controller.metrics import ControllerCollector
    from floodmark.controller.placement import broker_rack, place_replicas, topic_start
    from floodmark.controller.quorum.codec import parse_voters
    from floodmark.controller.quorum.core import QuorumConfig, QuorumCore
    from floodmark.controller.quorum.directory_id import (
        bootstrap_bindings,
        format_directory,
        load_or_format,
        new_directory_id,
    )
    from floodmark.controller.quorum.driver import QuorumDriver
    from floodmark.controller.quorum.effects import RoleChanged
    from floodmark.controller.quorum.messages import QuorumMessage
    from floodmark.controller.quorum.roles import (
        ElectionState,
        Follower,
        Leader,
        Role,
        leader_of,
        voted_for,
    )
    from floodmark.controller.quorum.rules import majority
    from floodmark.controller.quorum.state_file import QuorumStateFile
    from floodmark.controller.quorum.voter_history import in_force
    from floodmark.controller.quorum.voter_set import directory_of
    from floodmark.controller.quorum_view import (
        METADATA_PARTITION,
        METADATA_TOPIC,
        QuorumView,
        ReplicaProgress,
    )
    from floodmark.controller.record_check import MetadataRecord
    from floodmark.controller.rpc import RpcError
    from floodmark.controller.scram import Credentials
    from floodmark.controller.server import ControllerServer
    from floodmark.controller.snapshot import (
        SnapshotId,
        SnapshotStore,
        cut_log_before,
        decode_snapshot,
        encode_snapshot,
        open_with_snapshot,
        snapshot_epoch,
    )
    from floodmark.controller.startup import (
        add_controller_arguments,
        controller_setup,
        open_controller,
        start_controller,
        voter_addresses,
    )

__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "BrokerRegistration",
    "ControllerClient",
    "ControllerCollector",
    "ControllerConfig",
    "ControllerLogic",
    "ControllerServer",
    "Credentials",
    "Decision",
    "ElectionState",
    "Follower",
    "Leader",
    "MetadataImage",
    "MetadataLog",
    "MetadataRecord",
    "PartitionChangeNote",
    "QuorumConfig",
    "QuorumCore",
    "QuorumDriver",
    "QuorumMessage",
    "QuorumStateFile",
    "QuorumView",
    "Reassignment",
    "ReplicaProgress",
    "Role",
    "RoleChanged",
    "RpcError",
    "SnapshotId",
    "SnapshotStore",
    "TokenInfo",
    "TokenSettings",
    "Tokens",
    "TopicImage",
    "UnappliedRecord",
    "add_controller_arguments",
    "bootstrap_bindings",
    "broker_rack",
    "controller_setup",
    "cut_log_before",
    "decode_snapshot",
    "delegation_tokens",
    "directory_of",
    "elr_config",
    "encode_snapshot",
    "format_directory",
    "in_force",
    "leader_of",
    "load_or_format",
    "majority",
    "new_directory_id",
    "open_controller",
    "open_with_snapshot",
    "parse_voters",
    "place_replicas",
    "record_to_registration",
    "registration_to_record",
    "rpc",
    "scram",
    "snapshot_epoch",
    "start_controller",
    "topic_metas",
    "topic_start",
    "voted_for",
    "voter_addresses",
]

if not TYPE_CHECKING:  # mypy reads the imports above; Python loads them on use
    __getattr__ = face(__name__, __file__)
