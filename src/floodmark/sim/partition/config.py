"""Simulation parameters (virtual milliseconds; scaled down from Kafka's defaults so a run of a
few virtual seconds exercises many failovers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from floodmark.replication import DEFAULT_TRUNCATION, Truncation
from floodmark.sim.network import NetworkConfig

SIM_SCAN_CHUNK_BYTES = 64
"""Above the storage's minimum (61, a batch header), below any batch the simulator writes (a
one-record batch is 70 bytes and up, a transaction marker 78)."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    replicas: int = 3
    min_insync_replicas: int = 2
    truncation: Truncation = DEFAULT_TRUNCATION
    unclean_leader_election_enable: bool = False
    replica_lag_time_max_ms: int = 400  # Kafka: 30000
    fetch_wait_max_ms: int = 100  # Kafka: 500 (replica.fetch.wait.max.ms)
    fetch_backoff_ms: int = 20  # Kafka: 1000 (replica.fetch.backoff.ms)
    fetch_max_bytes: int = 64 * 1024
    request_timeout_ms: int = 250
    heartbeat_interval_ms: int = 50  # Kafka: 2000
    session_timeout_ms: int = 300  # Kafka: 9000 (broker.session.timeout.ms)
    hw_checkpoint_interval_ms: int = 200  # Kafka: 5000
    os_flush_interval_ms: int = 400  # the OS writing dirty pages back
    produce_timeout_ms: int = 1000
    """The producer's request.timeout.ms, also sent as the produce request's own timeout (as
    librdkafka and the Java client do). Kafka: 30000."""
    delivery_timeout_ms: int = 4000  # Kafka: 120000 (delivery.timeout.ms / message.timeout.ms)
    retry_backoff_ms: int = 20  # Kafka: 100
    unsafe_ack_duplicates_before_commit: bool = False
    """UNSAFE: the brokers answer a retried duplicate batch at once, before the high watermark
    covers it (the bug of issue 8). Only to show the explorer catches it."""
    kafka_aborted_batch_duplicates: bool = False
    """Kafka's duplicate rule across an ABORT marker (``ProduceSettings``): with a transactional
    writer that purges on abort (librdkafka), it loses committed records. Only to show the
    explorer catches it."""
    step_down_on_lapse: bool = True
    """A leader whose controller session lapsed steps down for clients (``replication.lease``,
    issue 26 §4). False: Kafka's behaviour (and floodmark's before), answering as leader until
    the metadata moves the partition; with the unsafe switch above, the explorer shows issue 8's
    loss, which the stepping down otherwise hides."""
    transaction_version: int = 0
    """``transaction.version`` of the simulated clients (``txn_coordinator.SimTxnCoordinator``):
    0 and 1 end a transaction without an epoch bump (EndTxn v4 and older); 2 is KIP-890 part 2
    (EndTxn v5, every end bumps the epoch). Scripted scenarios run 0; the explorer takes its
    ``--transaction-version``."""
    transaction_verification: bool = True
    """``transaction.partition.verification.enable`` (KIP-890 part 1, Kafka's default): the
    leader asks the transaction coordinator before a producer's first transactional batch of a
    transaction (a Produce naming its transactional id) and appends it only if the partition
    is in that transaction (``replication.txn_verification``)."""
    network: NetworkConfig = field(default_factory=NetworkConfig)
    autonomous: bool = True
    """True: brokers fetch, heartbeat, shrink ISRs and checkpoint on timers (explorer).
    False: a scenario script triggers every step by hand."""
    checkpoint_hw_on_change: bool = False
    """Write the HW checkpoint on every HW change (scenarios: makes "checkpointed HW" exact)."""
    remove_unclean_from_isr: bool = True
    """KIP-966's unclean-shutdown rule: a broker that lost unflushed data leaves the ISR when it
    re-registers. The historical scenarios (pre-2024 Kafka) turn it off."""
    restart_keeps_isr: bool = False
    """The ZooKeeper-era rule the seed documents' stories assume: a broker that restarts keeps its
    ISR membership. Off (as in KRaft and floodmark's controller): a new incarnation fences the old
    one, which leaves every ISR and rejoins through the leader's expansion rule."""
    eligible_leader_replicas: bool = False
    """KIP-966 eligible leader replicas in the controller's elections (off by default, as the
    rest of floodmark; the last-replica-standing scenario shows both)."""
    scan_chunk_bytes: int = SIM_SCAN_CHUNK_BYTES
    """``LogConfig.scan_chunk_bytes`` of every broker's log: how much one read takes when a
    restart scans the log (recovery, the producer-state and ``.txnindex`` rebuild). Kafka's is
    64 KiB, which the simulator's logs never reach; this default is below the smallest batch the
    simulator writes, so every batch straddles a read chunk at every restart. The explorer
    draws one per seed (``explore.scan_chunk_bytes_for``)."""
    topic: str = "t"
    partition: int = 0
