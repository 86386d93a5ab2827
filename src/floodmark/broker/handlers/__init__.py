"""Request handlers, one module per API family, in one table. Each handler takes (broker context,
header, request, connection) and returns a response dict for :func:`floodmark.wire.codec.build`,
pre-encoded parts, None (no response) or an awaitable of one of those. Handlers see the broker
through ``broker.context.HandlerContext``; a lone broker and a cluster member serve the same
table, and what differs between them is in the context (its membership, its replica manager).

The table names each handler by module and function; a module is imported at the first request
of one of its APIs (``HandlerTable``), so a broker starts without the code of the APIs nobody
calls on it (groups, transactions, share groups, ACLs, quotas: with the coordinators built at
first use, ``broker.broker``, about a quarter of a lone broker's start-up CPU; the test suite
starts hundreds of brokers)."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import cast

from floodmark.broker.boundary import Encoded
from floodmark.broker.context import Handler, HandlerContext
from floodmark.broker.handlers import data  # produce and fetch: every broker serves them
from floodmark.wire import SERVED, ApiKey

RawHandler = Callable[[HandlerContext, memoryview, int, data.ProduceGate | None],
                     Encoded | Awaitable[Encoded | None] | None]

# api key -> (module of this package, function)
TABLE: dict[int, tuple[str, str]] = {
    ApiKey.API_VERSIONS: ("admin", "api_versions"),
    ApiKey.METADATA: ("admin", "metadata"),
    ApiKey.CREATE_TOPICS: ("admin", "create_topics"),
    ApiKey.DELETE_TOPICS: ("admin", "delete_topics"),
    ApiKey.CREATE_PARTITIONS: ("admin", "create_partitions"),
    ApiKey.DESCRIBE_CONFIGS: ("admin", "describe_configs"),
    ApiKey.FETCH: ("replication", "fetch"),
    ApiKey.LIST_OFFSETS: ("debug", "list_offsets"),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ("debug", "offset_for_leader_epoch"),
    ApiKey.INIT_PRODUCER_ID: ("txn_apis", "init_producer_id"),
    ApiKey.ADD_PARTITIONS_TO_TXN: ("txn_apis", "add_partitions_to_txn"),
    ApiKey.ADD_OFFSETS_TO_TXN: ("txn_apis", "add_offsets_to_txn"),
    ApiKey.END_TXN: ("txn_apis", "end_txn"),
    ApiKey.TXN_OFFSET_COMMIT: ("txn_apis", "txn_offset_commit"),
    ApiKey.DESCRIBE_TRANSACTIONS: ("txn_apis", "describe_transactions"),
    ApiKey.LIST_TRANSACTIONS: ("txn_apis", "list_transactions"),
    ApiKey.DESCRIBE_PRODUCERS: ("describe_producers", "describe_producers"),
    ApiKey.UNREGISTER_BROKER: ("unregister_broker", "unregister_broker"),
    ApiKey.FIND_COORDINATOR: ("coordination", "find_coordinator"),
    # a consumer group's classic protocol members (KIP-848's migration), else group_apis
    ApiKey.JOIN_GROUP: ("classic_protocol", "join_group"),
    ApiKey.SYNC_GROUP: ("classic_protocol", "sync_group"),
    ApiKey.HEARTBEAT: ("classic_protocol", "heartbeat"),
    ApiKey.LEAVE_GROUP: ("classic_protocol", "leave_group"),
    ApiKey.OFFSET_COMMIT: ("group_apis", "offset_commit"),
    ApiKey.OFFSET_FETCH: ("group_apis", "offset_fetch"),
    ApiKey.LIST_GROUPS: ("group_apis", "list_groups"),
    ApiKey.DESCRIBE_GROUPS: ("group_apis", "describe_groups"),
    ApiKey.DELETE_GROUPS: ("group_apis", "delete_groups"),
    ApiKey.OFFSET_DELETE: ("group_apis", "offset_delete"),
    ApiKey.DESCRIBE_CLUSTER: ("admin", "describe_cluster"),
    ApiKey.UPDATE_FEATURES: ("features", "update_features"),
    ApiKey.DELETE_RECORDS: ("data", "delete_records"),
    ApiKey.DESCRIBE_LOG_DIRS: ("admin", "describe_log_dirs"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: ("admin", "alter_replica_log_dirs"),
    ApiKey.ELECT_LEADERS: ("admin", "elect_leaders"),
    ApiKey.ALTER_CONFIGS: ("admin", "alter_configs"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ("admin", "incremental_alter_configs"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ("admin", "alter_partition_reassignments"),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ("admin", "list_partition_reassignments"),
    ApiKey.DESCRIBE_QUORUM: ("quorum", "describe_quorum"),
    ApiKey.ADD_RAFT_VOTER: ("raft_voters", "add_raft_voter"),
    ApiKey.REMOVE_RAFT_VOTER: ("raft_voters", "remove_raft_voter"),
    ApiKey.WRITE_TXN_MARKERS: ("txn_markers", "write_txn_markers"),
    ApiKey.DESCRIBE_ACLS: ("acls", "describe_acls"),
    ApiKey.CREATE_ACLS: ("acls", "create_acls"),
    ApiKey.DELETE_ACLS: ("acls", "delete_acls"),
    ApiKey.SASL_HANDSHAKE: ("sasl_apis", "sasl_handshake"),
    ApiKey.SASL_AUTHENTICATE: ("sasl_apis", "sasl_authenticate"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ("scram_apis", "describe_user_scram_credentials"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ("scram_apis", "alter_user_scram_credentials"),
    ApiKey.CREATE_DELEGATION_TOKEN: ("delegation_tokens.create", "create_delegation_token"),
    ApiKey.RENEW_DELEGATION_TOKEN: ("delegation_tokens.renew", "renew_delegation_token"),
    ApiKey.EXPIRE_DELEGATION_TOKEN: ("delegation_tokens.expire", "expire_delegation_token"),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: ("delegation_tokens.describe",
                                       "describe_delegation_token"),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ("quotas", "describe_client_quotas"),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: ("consumer_group_apis", "consumer_group_heartbeat"),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ("consumer_group_apis", "consumer_group_describe"),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ("topic_partitions", "describe_topic_partitions"),
    ApiKey.LIST_CONFIG_RESOURCES: ("config_resources", "list_config_resources"),
    ApiKey.ALTER_CLIENT_QUOTAS: ("quotas", "alter_client_quotas"),
    # KIP-932 (share_group_apis checks group.share.enable and the coordinator itself)
    ApiKey.SHARE_GROUP_HEARTBEAT: ("share_group_apis", "share_group_heartbeat"),
    ApiKey.SHARE_GROUP_DESCRIBE: ("share_group_apis", "share_group_describe"),
    ApiKey.SHARE_FETCH: ("share_group_apis", "share_fetch"),
    ApiKey.SHARE_ACKNOWLEDGE: ("share_group_apis", "share_acknowledge"),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ("share_group_apis", "describe_share_group_offsets"),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: ("share_group_apis", "alter_share_group_offsets"),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: ("share_group_apis", "delete_share_group_offsets"),
    # the share coordinator (inter-broker)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: ("share_state_apis", "initialize_share_group_state"),
    ApiKey.READ_SHARE_GROUP_STATE: ("share_state_apis", "read_share_group_state"),
    ApiKey.WRITE_SHARE_GROUP_STATE: ("share_state_apis", "write_share_group_state"),
    ApiKey.DELETE_SHARE_GROUP_STATE: ("share_state_apis", "delete_share_group_state"),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: ("share_state_apis", "read_share_group_state_summary"),
}
COORDINATED = frozenset({ApiKey.TXN_OFFSET_COMMIT, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.CONSUMER_GROUP_HEARTBEAT})
"""Served by the group's coordinator only (``coordination.coordinated``)."""


class HandlerTable(Mapping[int, Handler]):
    """``TABLE`` as handlers: each module imported, and each handler looked up, once, at the
    first request of its API."""

    def __init__(self, table: Mapping[int, tuple[str, str]]) -> None:
        self._table = table
        self._resolved: dict[int, Handler] = {}

    def __getitem__(self, key: int) -> Handler:
        handler = self._resolved.get(key)
        if handler is None:
            module, name = self._table[key]
            handler = cast(Handler, getattr(
                importlib.import_module(f"{__name__}.{module}"), name))
            if key in COORDINATED:
                from floodmark.broker.handlers.coordination import coordinated

                handler = coordinated(handler)
            self._resolved[key] = handler
        return handler

    def __iter__(self) -> Iterator[int]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


HANDLERS: Mapping[int, Handler] = HandlerTable(TABLE)


# Hot path: handlers that take the raw frame (no kio decode, records stay views into the frame).
RAW_HANDLERS: dict[int, RawHandler] = {
    ApiKey.PRODUCE: data.produce_raw,
}
assert set(HANDLERS) | set(RAW_HANDLERS) == SERVED, (
    "API table and handlers must agree")
