"""The one table of Kafka APIs floodmark serves, and the versions of each.

ApiVersions answers from this table, dispatch refuses anything outside it, so the broker can never
advertise an API it does not implement (wire-compat.md §4.3, pitfall P14: never raise a minimum).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_QUORUM = 55
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87


@dataclass(frozen=True)
class VersionRange:
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


# Every advertised API is served up to the versions Apache Kafka 4.1.1 advertises (docs/wire.md);
# an API listed here would be one floodmark serves below Kafka's max (none now: Produce v13,
# KIP-516 topic ids in Produce, is served since the hot parser reads topic ids).
# ``tests/reference/test_api_versions.py`` checks this list.
KAFKA_REFERENCE = "4.1.1"
BELOW_KAFKA: dict[ApiKey, int] = {}  # key -> Kafka 4.1.1's max version

SUPPORTED: dict[ApiKey, VersionRange] = {
    # v12: transaction version 2 (KIP-890 part 2): the leader adds a transactional batch's
    # partition to its transaction itself (``handlers.data``). v13 (KIP-516): topics named by
    # topic id, UNKNOWN_TOPIC_ID for an id the broker does not know.
    ApiKey.PRODUCE: VersionRange(3, 13),
    ApiKey.FETCH: VersionRange(4, 18),
    ApiKey.LIST_OFFSETS: VersionRange(1, 10),
    ApiKey.METADATA: VersionRange(0, 13),
    ApiKey.OFFSET_COMMIT: VersionRange(2, 9),
    ApiKey.OFFSET_FETCH: VersionRange(1, 9),
    ApiKey.FIND_COORDINATOR: VersionRange(0, 6),
    ApiKey.JOIN_GROUP: VersionRange(0, 9),
    ApiKey.HEARTBEAT: VersionRange(0, 4),
    ApiKey.LEAVE_GROUP: VersionRange(0, 5),
    ApiKey.SYNC_GROUP: VersionRange(0, 5),
    ApiKey.DESCRIBE_GROUPS: VersionRange(0, 6),
    ApiKey.LIST_GROUPS: VersionRange(0, 5),
    ApiKey.API_VERSIONS: VersionRange(0, 4),
    ApiKey.CREATE_TOPICS: VersionRange(2, 7),
    ApiKey.DELETE_TOPICS: VersionRange(1, 6),
    ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 4),
    # The transaction coordinator (KIP-98). EndTxn v5, TxnOffsetCommit v5 and Produce v12 are
    # transaction version 2 (KIP-890 part 2): an epoch bump at every EndTxn (v5 answers the
    # new id and epoch), the partition (Produce v12) and the group (TxnOffsetCommit v5) added
    # to the transaction by the broker. A client uses them when ApiVersions finalizes
    # ``transaction.version`` 2 (``floodmark.features``). InitProducerId v5 only lets the answer
    # carry TRANSACTION_ABORTABLE.
    ApiKey.ADD_PARTITIONS_TO_TXN: VersionRange(0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: VersionRange(0, 4),
    ApiKey.END_TXN: VersionRange(0, 5),
    ApiKey.TXN_OFFSET_COMMIT: VersionRange(0, 5),
    ApiKey.WRITE_TXN_MARKERS: VersionRange(1, 1),  # v2 names the marker's TV2 version
    # ACLs (KIP-140; v1 adds PREFIXED patterns, KIP-290; v2 flexible). v0 is gone from
    # Kafka 4 and from kio; every client floodmark is tested with asks v1 or later.
    ApiKey.DESCRIBE_ACLS: VersionRange(1, 3),
    ApiKey.CREATE_ACLS: VersionRange(1, 3),
    ApiKey.DELETE_ACLS: VersionRange(1, 3),
    # Client quotas (KIP-546; v1 flexible).
    ApiKey.DESCRIBE_CLIENT_QUOTAS: VersionRange(0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: VersionRange(0, 1),
    ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
    ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
    ApiKey.DELETE_RECORDS: VersionRange(0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: VersionRange(1, 4),
    # JBOD (KIP-113): v0 is gone from Kafka 4 and from kio.
    ApiKey.ALTER_REPLICA_LOG_DIRS: VersionRange(1, 2),
    ApiKey.DELETE_GROUPS: VersionRange(0, 2),
    ApiKey.ELECT_LEADERS: VersionRange(0, 2),
    ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: VersionRange(0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
    ApiKey.OFFSET_DELETE: VersionRange(0, 0),
    ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 2),
    ApiKey.DESCRIBE_TRANSACTIONS: VersionRange(0, 0),
    ApiKey.LIST_TRANSACTIONS: VersionRange(0, 2),
    # KIP-664: the producers of each partition, from its producer state
    # (``handlers.describe_producers``).
    ApiKey.DESCRIBE_PRODUCERS: VersionRange(0, 0),
    # ``kafka-cluster unregister``: the controller removes a broker's registration
    # (``handlers.unregister_broker``).
    ApiKey.UNREGISTER_BROKER: VersionRange(0, 0),
    # Feature levels (KIP-584; ``floodmark.features``): ApiVersions answers them, UpdateFeatures
    # changes them (kafka-features upgrade/downgrade).
    ApiKey.UPDATE_FEATURES: VersionRange(0, 2),
    # SASL (KIP-43, KIP-152, KIP-368) and SCRAM credentials (KIP-554). SaslHandshake v0's
    # raw-token mode is not served (security/sasl/session.py).
    ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),
    ApiKey.SASL_AUTHENTICATE: VersionRange(0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
    # Delegation tokens (KIP-48; v0 is gone from Kafka 4 and from kio; CreateDelegationToken
    # v3 names another owner, KIP-373): ``handlers.delegation_tokens``.
    ApiKey.CREATE_DELEGATION_TOKEN: VersionRange(1, 3),
    ApiKey.RENEW_DELEGATION_TOKEN: VersionRange(1, 2),
    ApiKey.EXPIRE_DELEGATION_TOKEN: VersionRange(1, 2),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: VersionRange(1, 3),
    # KIP-848's consumer groups (broker/consumer_group); v1 (KIP-1082): the client makes its
    # member id. Regular-expression subscriptions are refused (INVALID_REQUEST) for now.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),
    # KIP-966's paged topic description (``handlers.topic_partitions``); Kafka's admin client
    # describes topics with it where it is offered.
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),
    # v0: KIP-714's ListClientMetricsResources; v1: KIP-1142 (``handlers.config_resources``).
    ApiKey.LIST_CONFIG_RESOURCES: VersionRange(0, 1),
    # The metadata quorum (``__cluster_metadata``), answered by the controllers' Raft leader
    # (``handlers.quorum``); v2 (KIP-853): directory ids and the voters' endpoints. Data
    # partitions: a leader's view, floodmark's debug read (``floodmark ui``).
    ApiKey.DESCRIBE_QUORUM: VersionRange(0, 2),
    # KIP-853: forwarded to the quorum leader (``handlers.raft_voters``), as Kafka's brokers do.
    ApiKey.ADD_RAFT_VOTER: VersionRange(0, 1),
    ApiKey.REMOVE_RAFT_VOTER: VersionRange(0, 0),
}


# Served but not advertised in ApiVersions. The share coordinator's inter-broker APIs (KIP-932, broker/share_group/persister): asked by
# share-partition leaders only, whether or not group.share.enable is on here.
UNADVERTISED: dict[ApiKey, VersionRange] = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.DELETE_SHARE_GROUP_STATE: VersionRange(0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: VersionRange(0, 0),
}

# KIP-932's share groups (broker/share_group), Kafka 4.1.1's versions: served, and advertised in
# ApiVersions, only while ``group.share.enable`` is on (Kafka 4.1 serves them once the cluster
# finalized share.version=1, a preview off by default). ShareFetch/ShareAcknowledge v2 and
# DescribeShareGroupOffsets v1 are Kafka 4.2's.
SHARE_GROUP: dict[ApiKey, VersionRange] = {
    ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),
    ApiKey.SHARE_FETCH: VersionRange(1, 1),
    ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
}
# Every API a handler serves (advertised or not).
SERVED = frozenset({*SUPPORTED, *UNADVERTISED, *SHARE_GROUP})

_RANGES: dict[int, tuple[VersionRange | None, VersionRange | None]] = {
    int(key): (SUPPORTED.get(key, SHARE_GROUP.get(key)), UNADVERTISED.get(key))
    for key in SERVED
}


def accepted_range(api_key: int, version: int) -> VersionRange | None:
    """The range of ``api_key`` that ``version`` is served in (advertised or not); the
    advertised one when it is in neither; None when floodmark does not serve that API."""
    ranges = _RANGES.get(api_key)
    if ranges is None:
        return None
    advertised, extra = ranges
    if extra is not None and version in extra:
        return extra
    return advertised if advertised is not None else extra


def supported_range(api_key: int) -> VersionRange | None:
    """The advertised range for ``api_key``, or None when floodmark does not serve that API."""
    try:
        return SUPPORTED[ApiKey(api_key)]
    except ValueError:
        return None
