"""Kafka's protocol sentinels and small enumerations, defined once: the numbers a request or a
record batch carries to mean "all", "none", "earliest" or "unknown". Every module that needs one
imports it from here (issue 25: ``ACKS_ALL``, ``NO_LEADER``, ``READ_COMMITTED`` and the ListOffsets
timestamps were each defined two or three times)."""

from __future__ import annotations

# Produce's acks
ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1

# Fetch's and ListOffsets' isolation_level
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ListOffsets' special timestamps (also the "earliest"/"latest" of Spark's offset JSON)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

# "none" in metadata, record batches and producer state
NO_LEADER = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_PARTITION_LEADER_EPOCH = -1

# Fetch's replica_id: a consumer, or floodmark's debug reader (reads up to the log end offset)
CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2

# replica.selector.class (KIP-392): Kafka's rack-aware selector, the one class floodmark has
# (unset: consumers read from the leader)
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
