"""The one typed registry of floodmark's settings, and the one check of every config value.

``DEFAULTS`` names every broker setting and its default (Kafka's names), and the controller's
``eligible.leader.replicas.version`` (KIP-966); ``SETTINGS`` is the
typed registry built from it: each setting's type and whether it may change at runtime
(``DYNAMIC``, Kafka's cluster-wide dynamic configs that floodmark applies live) or is read-only
(set at start). ``TOPIC_CONFIG_DEFAULTS`` maps each topic-level name to the broker setting it
defaults from. The checks every writer and reader of configs goes through live here too, each value checked
against its type here and against Kafka's validator of it in ``floodmark.config_rules.RULES``
(``check_value``: the one place a value is judged, used by the broker, the controller and the
CLI):

* ``validate_topic_configs``: a topic's config set (CreateTopics, AlterConfigs, and the
  controller before it writes a ``topic``/``topic_configs`` record);
* ``validate_dynamic``: a dynamic broker config set (AlterConfigs for a broker, and the
  controller before it writes a ``broker_configs`` record);
* ``topic_log_config``: what a broker makes of a topic's configs (its LogConfig and
  min.insync.replicas), the reading side of the same rules.

Below the broker and the controller (both use it; layers point down only). ``broker.config``
re-exports the registry for the broker's settings loader.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from floodmark.config_rules import NOT_FOR_BROKER_DEFAULT, RULES, Rule, refusal
from floodmark.errors import ErrorCode, KafkaError
from floodmark.storage import LogConfig

LONG_MAX = 9_223_372_036_854_775_807


class ConfigType(enum.IntEnum):
    """Kafka's ConfigType (DescribeConfigs v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(enum.IntEnum):
    """Kafka's ConfigSource (DescribeConfigs v1+), most specific first."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_GROUP_CONFIG = 8  # a group's own value (Kafka's GROUP_CONFIG, ConfigResource 32)


# Broker-level defaults, Kafka's names. Where floodmark differs from Kafka it says why.
DEFAULTS: dict[str, Any] = {
    "node.id": 1,
    "process.roles": "broker,controller",
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "auto.create.topics.enable": True,
    "socket.request.max.bytes": 104_857_600,
    "message.max.bytes": 1_048_588,
    "log.segment.bytes": 1_073_741_824,
    # Kafka's retention default is log.retention.hours=168; the ms and minutes forms are unset
    # (null) and win when set (ms first), as in Kafka.
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.flush.interval.messages": 9_223_372_036_854_775_807,
    "log.flush.interval.ms": None,
    "log.message.timestamp.type": "CreateTime",
    "unclean.leader.election.enable": False,
    # KIP-36: the rack (or availability zone) of this broker, null by default (Kafka's name and
    # default). Registered with the controller; Metadata and DescribeCluster answer it and
    # replica placement spreads each partition over racks (controller/placement.py).
    "broker.rack": None,
    # KIP-392: which replica a consumer with client.rack reads from. Null (Kafka's default):
    # the leader. org.apache.kafka.common.replica.RackAwareReplicaSelector: an in-sync replica
    # in the consumer's rack (replication/replica_selector.py); any other value is refused at
    # start.
    "replica.selector.class": None,
    # JBOD (KIP-112 / KIP-858): the log directories partitions live in, comma-separated
    # (Kafka's name). Null: --data-dir alone, as before. Broker-wide files (the metadata cache,
    # the cleaner's checkpoint) stay in --data-dir (Kafka's metadata.log.dir).
    "log.dirs": None,
    # Kafka waits 3000 ms before finishing the first rebalance of an empty group. Clients work
    # either way; a short wait keeps tests and demos quick while still batching joiners.
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1_800_000,
    # The most members a group may have (Kafka's names and defaults): a classic group's
    # (group.max.size, Integer.MAX_VALUE), a consumer group's (KIP-848, Integer.MAX_VALUE), a
    # share group's (KIP-932, 200); a member past it is GROUP_MAX_SIZE_REACHED.
    "group.max.size": 2_147_483_647,
    "group.consumer.max.size": 2_147_483_647,
    "group.share.max.size": 200,
    # KIP-848's consumer groups (group.protocol=consumer), Kafka's defaults; the first assignor
    # is the one a group uses when no member names one.
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.assignors": "uniform,range",
    # KIP-848's online migration between classic and consumer groups (Kafka 4's default):
    # bidirectional, upgrade, downgrade or disabled, in any case
    "group.consumer.migration.policy": "bidirectional",
    # The bounds a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    # (a group config, floodmark.group_configs) are checked against (Kafka's names and
    # defaults). Unlike Kafka, floodmark does not refuse to start with a broker default
    # outside them (its tests run 300 ms heartbeats).
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
    # KIP-1071's streams groups: floodmark serves none, but their group configs are kept and
    # described as Kafka's are, with these defaults and bounds (Kafka's).
    "group.streams.session.timeout.ms": 45_000,
    "group.streams.min.session.timeout.ms": 45_000,
    "group.streams.max.session.timeout.ms": 60_000,
    "group.streams.heartbeat.interval.ms": 5_000,
    "group.streams.min.heartbeat.interval.ms": 5_000,
    "group.streams.max.heartbeat.interval.ms": 15_000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3_000,
    # KIP-932's share groups (broker/share_group). Kafka 4.1 serves them only once the cluster
    # finalized share.version=1 (off by default, a preview); floodmark's switch is Kafka 4.1's
    # internal group.share.enable, off by default too. The others are Kafka's defaults;
    # share.auto.offset.reset and share.isolation.level are group configs in Kafka, broker-wide
    # here, and each share group's own value (a group config) wins.
    "group.share.enable": False,
    "group.share.session.timeout.ms": 45_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.delivery.count.limit": 5,
    "group.share.partition.max.record.locks": 2_000,
    # The bounds of a share group's own values (Kafka's names and defaults).
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.min.partition.max.record.locks": 100,
    "group.share.max.partition.max.record.locks": 4_000,
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
    # The share coordinator's __share_group_state (Kafka's names; Kafka's default is 50
    # partitions, one keeps a small broker small, as for __consumer_offsets).
    "share.coordinator.state.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
    # Kafka's default is 50 partitions; one keeps a small broker small.
    "offsets.topic.num.partitions": 1,
    "offsets.retention.minutes": 10080,
    "log.checkpoint.interval.ms": 5000,
    # Log compaction (Kafka's names and defaults).
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": True,
    "log.cleaner.backoff.ms": 15000,
    "log.cleaner.dedupe.buffer.size": 134_217_728,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": 9_223_372_036_854_775_807,
    "log.cleaner.delete.retention.ms": 86_400_000,
    "log.retention.check.interval.ms": 300_000,
    "replica.lag.time.max.ms": 30000,
    # Replica fetching (Kafka's names and defaults): the fetchers per source broker, each one
    # connection carrying one Fetch for all its partitions (partition -> fetcher by hash of
    # topic and partition), and that Fetch's sizes and long poll.
    "num.replica.fetchers": 1,
    # The network threads of each TLS listener (SSL, SASL_SSL): they do its connections'
    # handshakes, decryption, framing and encryption off the event loop (Kafka's name and
    # default; PLAINTEXT listeners are read by the event loop itself).
    "num.network.threads": 3,
    "replica.fetch.max.bytes": 1_048_576,
    "replica.fetch.response.max.bytes": 10_485_760,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.backoff.ms": 1000,
    # Incremental fetch sessions (KIP-227): slots in the cache, and how long a session is kept
    # from eviction by a newcomer (Kafka's names and defaults).
    "max.incremental.fetch.session.cache.slots": 1000,
    "min.incremental.fetch.session.eviction.ms": 120_000,
    "transactional.id.expiration.ms": 604_800_000,
    # The transaction coordinator (KIP-98), Kafka's names. Kafka's __transaction_state has 50
    # partitions; one keeps a small broker small, as for __consumer_offsets. Kafka looks for
    # timed-out transactions every 10 s; every second keeps an abandoned transaction's records
    # from holding back read_committed consumers (the LSO) much past its timeout.
    "transaction.max.timeout.ms": 900_000,
    # KIP-890 part 1: a partition leader asks the coordinator before a producer's first
    # transactional batch there (Kafka's name and default).
    "transaction.partition.verification.enable": True,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    # floodmark's protocol mode (SPEC §2). Anything but leader-epoch is known to lose or diverge
    # data and needs floodmark.truncation.allow.unsafe=true to start.
    "floodmark.truncation": "leader-epoch",
    "floodmark.truncation.allow.unsafe": False,
    # UNSAFE, off: answer an idempotent producer's retry of a batch already in the log at once,
    # before the high watermark covers it (the bug of issue 8: acknowledged writes lost when the
    # leader is cut off). Only for proving that the fault tests catch it.
    "floodmark.unsafe.ack.duplicates.before.commit": False,
    # UNSAFE, off: keep every write not yet fsynced in this process's memory (a page cache of
    # its own over the real files), so that killing the process loses it as a power cut would
    # (storage/page_cache.py). For floodmark chaos run --faults power-loss only.
    "floodmark.unsafe.power.loss.page.cache": False,
    # A controller setting. KIP-966 eligible leader replicas with KIP-966's unclean-shutdown
    # rule: 1 on, 0 off. Kafka 4.x names it as a feature (eligible.leader.replicas.version),
    # on by default for clusters made by 4.1 and later; Kafka 3.7-3.9 had it as the controller
    # config eligible.leader.replicas.enable. The controller also reads min.insync.replicas.
    "eligible.leader.replicas.version": 1,
    # Authorization (Kafka's names and defaults): off until authorizer.class.name names
    # org.apache.kafka.metadata.authorizer.StandardAuthorizer; then a resource without ACLs is
    # denied to all but super.users (principals separated by ";") unless
    # allow.everyone.if.no.acl.found is true.
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": False,
    # SASL on SASL_PLAINTEXT / SASL_SSL listeners (Kafka's names; docs/security.md). Kafka's
    # default mechanism is GSSAPI, which floodmark does not serve: SCRAM is the default here.
    # ``listener.name.<listener>.sasl.enabled.mechanisms`` overrides the list per listener.
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    # The mechanism brokers log in to each other with when the inter-broker listener is SASL
    # (Kafka's name and default; GSSAPI is not served, so such a broker must set PLAIN or
    # SCRAM-SHA-*); the credentials are listener.name.<l>.<mechanism>.sasl.jaas.config.
    "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    "connections.max.reauth.ms": 0,
    "connection.failed.authentication.delay.ms": 100,
    "sasl.server.max.receive.size": 524_288,
    # PLAIN's users, one ``name:password`` a line (floodmark's; Kafka puts them in its JAAS
    # config). PLAIN on a listener without TLS is refused at start unless the unsafe setting
    # below says otherwise.
    "floodmark.sasl.plain.users.file": "",
    "floodmark.unsafe.sasl.plain.without.tls": False,
    # OAUTHBEARER (KIP-255, KIP-768): JWTs signed by a key of this JSON Web Key Set (a file,
    # file:// URL or http(s) URL, re-read every refresh.ms), with Kafka's claim checks.
    # Unsecured tokens (alg none) only with the unsafe setting.
    # Delegation tokens (KIP-48, Kafka's names and defaults): off until the secret is set (the
    # same on every broker: each computes a token's HMAC from its id with it); a token lives at
    # most max.lifetime.ms and expires expiry.time.ms after its creation or last renewal.
    "delegation.token.secret.key": "",
    "delegation.token.max.lifetime.ms": 604_800_000,
    "delegation.token.expiry.time.ms": 86_400_000,
    "sasl.oauthbearer.jwks.endpoint.url": "",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": 3_600_000,
    "sasl.oauthbearer.expected.audience": "",
    "sasl.oauthbearer.expected.issuer": "",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.clock.skew.seconds": 30,
    "floodmark.unsafe.sasl.oauthbearer.unsecured.jwt": False,
    # GSSAPI (Kerberos) is not served. Its settings are Kafka's, with Kafka's defaults, kept and
    # described, dynamic as Kafka's listener SASL settings are, and without effect: a copied
    # server.properties loads, and an AlterConfigs naming one (librdkafka's admin test 0081
    # sets sasl.kerberos.min.time.before.relogin on a broker) succeeds as on Kafka.
    "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
    "sasl.kerberos.min.time.before.relogin": 60_000,
    "sasl.kerberos.ticket.renew.jitter": 0.05,
    "sasl.kerberos.ticket.renew.window.factor": 0.8,
    # Client quotas (Kafka's names and defaults): a rate is measured over quota.window.num
    # samples of quota.window.size.seconds each; the quotas themselves are metadata records
    # (AlterClientQuotas, ``floodmark quota set``).
    "quota.window.num": 11,
    "quota.window.size.seconds": 1,
    # -- The broker defaults of topic configs (issue 23), Kafka's names and Kafka 4.1's defaults.
    # compression.type: the codec the leader stores batches in ("producer" keeps the client's;
    # replication/log_validator.py re-compresses others); the levels are KIP-390's.
    "compression.type": "producer",
    "compression.gzip.level": -1,
    "compression.lz4.level": 9,
    "compression.zstd.level": 3,
    # KIP-937: how far a CreateTime record may lie in the past/future of the leader's clock.
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.message.timestamp.after.max.ms": 3_600_000,
    # Time-based segment roll: the ms forms are unset (null) in Kafka and the hours forms apply.
    "log.roll.ms": None,
    "log.roll.hours": 168,
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": 0,
    # A segment rolls when its offset (8 B an entry) or time index (12 B) reaches this size.
    "log.index.size.max.bytes": 10_485_760,
    "log.index.interval.bytes": 4096,
    # Accepted and described; floodmark neither preallocates segment files nor delays their
    # deletion (docs/storage.md, "Topic configs floodmark takes without acting on them").
    "log.preallocate": False,
    "log.segment.delete.delay.ms": 60_000,
    # Tiered storage (KIP-405): floodmark has none; -2 means "retention.ms / retention.bytes".
    "log.local.retention.ms": -2,
    "log.local.retention.bytes": -2,
}

# Topic-level config names and the broker setting each one defaults from.
TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.insync.replicas": "min.insync.replicas",
    "segment.bytes": "log.segment.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    # issue 23's topic configs
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "preallocate": "log.preallocate",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}

# A topic config whose broker setting is null by default takes its value from another form
# (Kafka's ``log.roll.hours`` for ``segment.ms``...): the broker setting it is derived from, and
# the factor to milliseconds. Kafka lists no synonym for the null setting (DescribeConfigs).
DERIVED_TOPIC_DEFAULTS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.hours", 3_600_000),),
    "segment.jitter.ms": (("log.roll.jitter.hours", 3_600_000),),
}

# Topic configs with no broker setting behind them (Kafka's DEFAULT_CONFIG, no synonym): their
# type and default. floodmark has no replication throttles and no tiered storage: the throttle
# lists are accepted and kept, ``remote.storage.enable=true`` is refused as Kafka refuses it on
# a broker without tiered storage.
TOPIC_ONLY_CONFIGS: dict[str, tuple[ConfigType, Any]] = {
    "leader.replication.throttled.replicas": (ConfigType.LIST, ""),
    "follower.replication.throttled.replicas": (ConfigType.LIST, ""),
    "remote.storage.enable": (ConfigType.BOOLEAN, False),
    "remote.log.copy.disable": (ConfigType.BOOLEAN, False),
    "remote.log.delete.on.disable": (ConfigType.BOOLEAN, False),
}


# Kafka's cluster-wide dynamic broker configs (DynamicBrokerConfig) that floodmark has and
# applies live: the log defaults of every topic without its own value, the cleaner's pace,
# min.insync.replicas and the controller's unclean-election default.
DYNAMIC: frozenset[str] = frozenset({
    "log.segment.bytes", "log.retention.ms", "log.retention.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.message.timestamp.type",
    "message.max.bytes", "log.cleanup.policy", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms", "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size", "min.insync.replicas", "unclean.leader.election.enable",
    # issue 23's topic-config defaults (the hours/minutes forms are read-only, as in Kafka)
    "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.roll.ms", "log.roll.jitter.ms",
    "log.index.size.max.bytes", "log.index.interval.bytes", "log.preallocate",
    "log.segment.delete.delay.ms", "log.local.retention.ms", "log.local.retention.bytes",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
})
_INT_SETTINGS = frozenset({"node.id", "num.partitions", "default.replication.factor",
                           "min.insync.replicas", "socket.request.max.bytes", "message.max.bytes",
                           "log.segment.bytes", "group.initial.rebalance.delay.ms",
                           "group.min.session.timeout.ms", "group.max.session.timeout.ms",
                           "group.max.size",
                           "group.consumer.session.timeout.ms",
                           "group.consumer.heartbeat.interval.ms",
                           "group.share.session.timeout.ms",
                           "group.share.heartbeat.interval.ms",
                           "group.share.record.lock.duration.ms",
                           "group.share.delivery.count.limit",
                           "group.share.partition.max.record.locks",
                           *(n for n in DEFAULTS if n.startswith(("group.consumer.m",
                                                                  "group.share.m",
                                                                  "group.streams."))
                             and n != "group.consumer.migration.policy"),
                           "share.coordinator.state.topic.num.partitions",
                           "share.coordinator.state.topic.replication.factor",
                           "share.coordinator.state.topic.min.isr",
                           "offsets.topic.num.partitions", "offsets.retention.minutes",
                           "log.checkpoint.interval.ms", "replica.lag.time.max.ms",
                           "num.replica.fetchers", "num.network.threads",
                           "replica.fetch.max.bytes",
                           "replica.fetch.response.max.bytes", "replica.fetch.min.bytes",
                           "replica.fetch.wait.max.ms", "replica.fetch.backoff.ms",
                           "transactional.id.expiration.ms", "transaction.max.timeout.ms",
                           "transaction.state.log.num.partitions",
                           "transaction.state.log.replication.factor",
                           "transaction.state.log.min.isr",
                           "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                           "eligible.leader.replicas.version",
                           "connection.failed.authentication.delay.ms",
                           "sasl.server.max.receive.size",
                           "sasl.oauthbearer.jwks.endpoint.refresh.ms",
                           "sasl.oauthbearer.clock.skew.seconds",
                           # issue 23's topic-config defaults
                           "compression.gzip.level", "compression.lz4.level",
                           "compression.zstd.level", "log.roll.hours", "log.roll.jitter.hours",
                           "log.index.size.max.bytes", "log.index.interval.bytes",
                           "log.retention.minutes", "log.retention.hours"})
_LIST_SETTINGS = frozenset({"log.cleanup.policy", "process.roles", "sasl.enabled.mechanisms",
                            "group.consumer.assignors", "sasl.oauthbearer.expected.audience"})
_LONG_NULLABLE = frozenset({"log.flush.interval.ms", "log.roll.ms", "log.roll.jitter.ms",
                            "log.retention.ms"})


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    type: ConfigType
    dynamic: bool

    def holds(self, value: Any) -> bool:
        """Is ``value`` (typed, from ``--set`` or TOML) of this setting's type?"""
        if self.type is ConfigType.BOOLEAN:
            return isinstance(value, bool)
        if self.type in (ConfigType.INT, ConfigType.LONG):
            return isinstance(value, int) and not isinstance(value, bool)
        if self.type is ConfigType.DOUBLE:
            return isinstance(value, int | float) and not isinstance(value, bool)
        return True

    def parse(self, value: Any) -> Any:
        """A value given as text (AlterConfigs) or typed (TOML) -> the setting's type;
        ValueError with Kafka's wording when it is not one."""
        text = str(value).strip()
        if self.type is ConfigType.BOOLEAN:
            if isinstance(value, bool):
                return value
            if text.lower() not in ("true", "false"):
                raise ValueError(f"Invalid value {value} for configuration {self.name}: "
                                 f"Expected value to be either true or false")
            return text.lower() == "true"
        if self.type in (ConfigType.INT, ConfigType.LONG):
            try:
                number = int(text)
            except ValueError:
                raise ValueError(f"Invalid value {value} for configuration {self.name}: Not a "
                                 f"number of type {self.type.name}") from None
            if self.type is ConfigType.INT and not -(2**31) <= number < 2**31:
                raise ValueError(f"Invalid value {value} for configuration {self.name}: Not a "
                                 f"number of type INT")
            return number
        if self.type is ConfigType.DOUBLE:
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"Invalid value {value} for configuration {self.name}: Not a "
                                 f"number of type DOUBLE") from None
        return text


def _setting(name: str, default: Any) -> Setting:
    if isinstance(default, bool):
        kind = ConfigType.BOOLEAN
    elif name in _INT_SETTINGS:
        kind = ConfigType.INT
    elif isinstance(default, int) or name in _LONG_NULLABLE:
        kind = ConfigType.LONG
    elif isinstance(default, float):
        kind = ConfigType.DOUBLE
    elif name in _LIST_SETTINGS:
        kind = ConfigType.LIST
    else:
        kind = ConfigType.STRING
    return Setting(name, default, kind, name in DYNAMIC)


def eligible_leader_replicas_enabled(value: Any) -> bool:
    """``eligible.leader.replicas.version`` (text or typed) as on/off; ValueError with Kafka's
    wording for anything but a known version."""
    return bool(check_value("eligible.leader.replicas.version", value))


def validate_dynamic(configs: Mapping[str, Any], resource: str) -> dict[str, Any]:
    """Check a dynamic broker config set (for broker ``resource``: an id, or "" for the
    cluster-wide default) against the registry; returns it typed. Kafka's refusals, as
    ValueError messages: read-only settings first (the whole resource is refused), then
    unknown names, then values of the wrong type or out of range."""
    fixed = sorted(n for n in configs if n in SETTINGS and not SETTINGS[n].dynamic)
    if fixed:
        raise ValueError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    unknown = sorted(n for n in configs if n not in SETTINGS)
    if unknown:
        raise ValueError(f"Unknown broker config(s): {', '.join(unknown)}")
    typed = {name: check_value(name, value) for name, value in configs.items()}
    # The log settings must make a log config (every broker builds its topics' on them).
    LogConfig.from_kafka({k: v for k, v in typed.items() if v is not None})
    return typed


def render(value: Any) -> str | None:
    """A setting's value as DescribeConfigs shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


SENSITIVE_SUFFIXES = (".password", "ssl.keystore.key", "sasl.jaas.config",
                      "sasl.oauthbearer.client.secret", "delegation.token.secret.key")


def is_sensitive(name: str) -> bool:
    """A setting whose value is a secret (Kafka's PASSWORD type): DescribeConfigs answers it as
    null with ``is_sensitive`` set, and no log line carries it."""
    return name.endswith(SENSITIVE_SUFFIXES)


def parse_value(text: str) -> Any:
    """A ``--set`` value: int, bool, float, or left as a string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(low)
    except ValueError:
        pass
    try:
        return float(low)
    except ValueError:
        return text


SETTINGS: dict[str, Setting] = {name: _setting(name, default) for name, default in DEFAULTS.items()}
assert set(SETTINGS) >= DYNAMIC, "every dynamic setting is a setting"

# Topic-level names accepted in CreateTopics besides those defaulting from a broker setting
# (stored, shown by DescribeConfigs).
EXTRA_TOPIC_CONFIGS = frozenset({
    "flush.policy", "message.timestamp.difference.max.ms", "retention.hours",
})

def rule_of(name: str) -> Rule | None:
    """The Kafka validator ``name`` is checked with (``config_rules.RULES``): its own, else (a
    broker setting a topic config defaults from) the topic config's."""
    rule = RULES.get(name)
    if rule is None and name in _TOPIC_NAME_OF:
        rule = RULES.get(_TOPIC_NAME_OF[name])
    return rule


def check_value(name: str, value: Any, setting: Setting | None = None) -> Any:
    """``value`` (text or typed) of setting ``name`` -> typed, checked against its type and its
    rule; ValueError with Kafka's message otherwise. ``setting``: the registry entry to type it
    with (default: the broker setting of that name, else the topic config's); a name neither
    knows passes as given (its broker, or a newer Kafka, decides)."""
    if setting is None:
        setting = SETTINGS.get(name) or topic_config_setting(name)
    if setting is None or value is None:
        return value
    typed = setting.parse(value)
    rule = rule_of(name)
    why = refusal(rule, name, typed) if rule is not None and typed is not None else None
    if why is not None:
        raise ValueError(why)
    return typed


_TOPIC_NAME_OF = {broker: topic for topic, broker in TOPIC_CONFIG_DEFAULTS.items()
                  if topic in RULES and topic not in NOT_FOR_BROKER_DEFAULT}


def topic_config_setting(name: str) -> Setting | None:
    """The typed registry entry a topic config is checked with: its broker setting's (under the
    topic name), or its own for a topic-only config; None for floodmark's untyped extras."""
    broker_name = TOPIC_CONFIG_DEFAULTS.get(name)
    if broker_name is not None:
        return replace(SETTINGS[broker_name], name=name)
    if name in TOPIC_ONLY_CONFIGS:
        kind, default = TOPIC_ONLY_CONFIGS[name]
        return Setting(name, default, kind, False)
    return None


def topic_log_config(configs: Mapping[str, Any], base: LogConfig | None = None,
                     default_min_insync_replicas: int = 1) -> tuple[LogConfig, int]:
    """A topic's configs as a broker uses them: its LogConfig (on top of ``base``, the broker's
    log settings) and its min.insync.replicas. ValueError/TypeError when a value is not one."""
    log_config = LogConfig.from_kafka(dict(configs), base)
    min_isr = int(str(configs.get("min.insync.replicas", default_min_insync_replicas)))
    return log_config, min_isr


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """A topic's config set checked against the registry; returns it without null values.
    KafkaError INVALID_CONFIG naming the setting and the bad value otherwise."""
    out: dict[str, Any] = {}
    for name, value in configs.items():
        setting = topic_config_setting(name)
        if setting is None and name not in EXTRA_TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            continue
        out[name] = value
        if setting is not None:  # its type (the broker setting's it defaults from), its rule
            try:
                check_value(name, value, setting)
            except ValueError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    try:
        topic_log_config(out)
    except (ValueError, TypeError) as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return out


def split_topic_configs(configs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A topic's set read back from somewhere older than this check (a metadata record, an
    earlier version's file): the values the registry takes, and why each other one is refused.
    Keeping the topic with the good ones is never worse than losing the topic."""
    kept: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name, value in configs.items():
        try:
            kept.update(validate_topic_configs({name: value}))
        except KafkaError as exc:
            refused[name] = exc.message
    return kept, refused


def split_dynamic_configs(configs: Mapping[str, Any], resource: str
                          ) -> tuple[dict[str, Any], dict[str, str]]:
    """A dynamic broker set read back from somewhere older than this check (a ``broker_configs``
    record written before a rule existed): the values the registry takes, and why each other one
    is refused (``split_topic_configs``' rule for broker resources)."""
    kept: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for name, value in configs.items():
        try:
            validate_dynamic({name: value}, resource)
        except (ValueError, TypeError) as exc:
            refused[name] = str(exc)
        else:
            kept[name] = value
    return kept, refused


def dynamic_layer(configs: Mapping[str, Any]) -> dict[str, Any]:
    """A ``broker_configs`` record's set as a broker takes it into use (typed; names it does not
    know are left out). ValueError when a value is not of its setting's type."""
    return {k: SETTINGS[k].parse(v) for k, v in configs.items() if k in SETTINGS}
