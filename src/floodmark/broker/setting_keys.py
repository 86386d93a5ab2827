"""The settings the broker reads, each a typed key: ``config.value(NUM_PARTITIONS)`` is an
``int``, ``config.value(LOG_CLEANER_ENABLE)`` a ``bool`` (``BrokerConfig.value``). A key names a
setting of the one registry (``floodmark.settings.SETTINGS``) and is checked against its type
when this module loads, so a misspelt name or a number read as a flag fails at import, not at the
read; the value is the one in force (this broker's dynamic value, the cluster default, the static
setting, Kafka's default)."""

from __future__ import annotations

from dataclasses import dataclass

from floodmark.settings import SETTINGS, ConfigType


def _check(name: str, types: tuple[ConfigType, ...]) -> None:
    setting = SETTINGS.get(name)
    if setting is None:
        raise ValueError(f"{name}: not a setting floodmark knows")
    if types and setting.type not in types:
        raise ValueError(f"{name} is a {setting.type.name} setting")


@dataclass(frozen=True, slots=True)
class IntKey:
    """An INT or LONG setting."""

    name: str

    def __post_init__(self) -> None:
        _check(self.name, (ConfigType.INT, ConfigType.LONG))


@dataclass(frozen=True, slots=True)
class BoolKey:
    """A BOOLEAN setting."""

    name: str

    def __post_init__(self) -> None:
        _check(self.name, (ConfigType.BOOLEAN,))


@dataclass(frozen=True, slots=True)
class RawKey:
    """A STRING or LIST setting, as the registry holds it (text, or None when unset)."""

    name: str

    def __post_init__(self) -> None:
        _check(self.name, ())


ALLOW_EVERYONE_IF_NO_ACL_FOUND = BoolKey("allow.everyone.if.no.acl.found")
AUTHORIZER_CLASS_NAME = RawKey("authorizer.class.name")
AUTO_CREATE_TOPICS_ENABLE = BoolKey("auto.create.topics.enable")
CONNECTION_FAILED_AUTHENTICATION_DELAY_MS = IntKey("connection.failed.authentication.delay.ms")
DEFAULT_REPLICATION_FACTOR = IntKey("default.replication.factor")
DELEGATION_TOKEN_EXPIRY_TIME_MS = IntKey("delegation.token.expiry.time.ms")
DELEGATION_TOKEN_MAX_LIFETIME_MS = IntKey("delegation.token.max.lifetime.ms")
ELIGIBLE_LEADER_REPLICAS_VERSION = IntKey("eligible.leader.replicas.version")
FLOODMARK_UNSAFE_POWER_LOSS_PAGE_CACHE = BoolKey("floodmark.unsafe.power.loss.page.cache")
GROUP_CONSUMER_ASSIGNORS = RawKey("group.consumer.assignors")
GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS = IntKey("group.consumer.heartbeat.interval.ms")
GROUP_CONSUMER_MAX_SIZE = IntKey("group.consumer.max.size")
GROUP_CONSUMER_MIGRATION_POLICY = RawKey("group.consumer.migration.policy")
GROUP_CONSUMER_SESSION_TIMEOUT_MS = IntKey("group.consumer.session.timeout.ms")
GROUP_INITIAL_REBALANCE_DELAY_MS = IntKey("group.initial.rebalance.delay.ms")
GROUP_MAX_SESSION_TIMEOUT_MS = IntKey("group.max.session.timeout.ms")
GROUP_MAX_SIZE = IntKey("group.max.size")
GROUP_MIN_SESSION_TIMEOUT_MS = IntKey("group.min.session.timeout.ms")
GROUP_SHARE_ENABLE = BoolKey("group.share.enable")
GROUP_SHARE_MAX_SIZE = IntKey("group.share.max.size")
LOG_CHECKPOINT_INTERVAL_MS = IntKey("log.checkpoint.interval.ms")
LOG_CLEANER_BACKOFF_MS = IntKey("log.cleaner.backoff.ms")
LOG_CLEANER_DEDUPE_BUFFER_SIZE = IntKey("log.cleaner.dedupe.buffer.size")
LOG_CLEANER_ENABLE = BoolKey("log.cleaner.enable")
LOG_RETENTION_CHECK_INTERVAL_MS = IntKey("log.retention.check.interval.ms")
MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = IntKey("max.incremental.fetch.session.cache.slots")
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = IntKey("min.incremental.fetch.session.eviction.ms")
MIN_INSYNC_REPLICAS = IntKey("min.insync.replicas")
NUM_NETWORK_THREADS = IntKey("num.network.threads")
NUM_PARTITIONS = IntKey("num.partitions")
OFFSETS_TOPIC_NUM_PARTITIONS = IntKey("offsets.topic.num.partitions")
QUOTA_WINDOW_NUM = IntKey("quota.window.num")
QUOTA_WINDOW_SIZE_SECONDS = IntKey("quota.window.size.seconds")
REPLICA_LAG_TIME_MAX_MS = IntKey("replica.lag.time.max.ms")
REPLICA_SELECTOR_CLASS = RawKey("replica.selector.class")
SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS = IntKey("sasl.oauthbearer.jwks.endpoint.refresh.ms")
SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR = IntKey("share.coordinator.state.topic.min.isr")
SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS = IntKey("share.coordinator.state.topic.num.partitions")
SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR = IntKey("share.coordinator.state.topic.replication.factor")
SOCKET_REQUEST_MAX_BYTES = IntKey("socket.request.max.bytes")
SUPER_USERS = RawKey("super.users")
TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS = IntKey("transaction.abort.timed.out.transaction.cleanup.interval.ms")
TRANSACTION_MAX_TIMEOUT_MS = IntKey("transaction.max.timeout.ms")
TRANSACTION_PARTITION_VERIFICATION_ENABLE = BoolKey("transaction.partition.verification.enable")
TRANSACTION_STATE_LOG_MIN_ISR = IntKey("transaction.state.log.min.isr")
TRANSACTION_STATE_LOG_NUM_PARTITIONS = IntKey("transaction.state.log.num.partitions")
TRANSACTION_STATE_LOG_REPLICATION_FACTOR = IntKey("transaction.state.log.replication.factor")
TRANSACTIONAL_ID_EXPIRATION_MS = IntKey("transactional.id.expiration.ms")
