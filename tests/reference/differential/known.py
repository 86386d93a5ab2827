"""Known differences: the allow-list. Each entry names a scenario and field path (``fnmatch``
pattern over ``scenario:path``) and says why the difference is kept; the test fails on every
difference no entry matches, and on an entry that matches nothing (a fixed difference must leave
the list). In a pattern only ``*`` is a wildcard (brackets are literal: ``[name=x]``). Reasons say where the fix would go when the difference is a floodmark gap."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.reference.differential.compare import Difference


@dataclass(frozen=True)
class Known:
    pattern: str
    reason: str
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        regex = ".*".join(re.escape(part) for part in self.pattern.split("*"))
        object.__setattr__(self, "_regex", re.compile(regex + r"\Z"))

    def matches(self, d: Difference) -> bool:
        return self._regex.match(d.key) is not None


KNOWN: list[Known] = [
    # -- kept on purpose ------------------------------------------------------------------------
    *(Known(f"{where}.responses[0].partitions[0].{name}",
          "OFFSET_OUT_OF_RANGE: floodmark sends the partition's high watermark, LSO and log "
          "start offset where Kafka sends -1; floodmark's follower (replica_fetcher -> the "
          "replication core) reads the leader's log start from this answer where Kafka's asks "
          "ListOffsets. Kept: the replication core is out of this change's reach.")
      for where in ("fetch:beyond_end", "fetch:negative_offset",
                    "delete_records:fetch_below_start")
      for name in ("high_watermark", "last_stable_offset", "log_start_offset")),
    Known("produce:*.partition_responses[0].log_start_offset",
          "A produce refused before the append (INVALID_REQUIRED_ACKS, MESSAGE_TOO_LARGE, "
          "CORRUPT_MESSAGE): Kafka sends log_start_offset -1, floodmark the partition's. "
          "Harmless: clients read it only with UNKNOWN_PRODUCER_ID/OUT_OF_ORDER_SEQUENCE_NUMBER."),
    Known("produce:bad_crc.*.error_message",
          "floodmark says which batch fails CRC-32C and both CRCs; Kafka sends no message."),
    Known("describe_configs:unknown_topic.results[0].error_message",
          "floodmark names the unknown topic; Kafka sends an empty message."),
    Known("create_partitions:unknown_topic.*.error_message",
          "floodmark names the unknown topic; Kafka sends no message."),
    Known("transactions:describe_ongoing.transaction_states[transactional_id=diff-no-txn-<run>]"
          ".producer_*",
          "TRANSACTIONAL_ID_NOT_FOUND: Kafka fills producer id and epoch with 0 (unset "
          "fields), floodmark with -1 (no producer); clients show the error code."),
    Known("offset_for_leader_epoch:epoch_3.*.error_code",
          "An epoch above the leader's latest: Kafka answers NONE with (-1, -1), floodmark "
          "UNKNOWN_LEADER_EPOCH (replication/fencing.py, the table's last row). Kept: a requester "
          "that holds a record of a newer epoch has proof of a newer leader, and librdkafka takes "
          "Kafka's (-1, -1) for log truncation and resets the consumer's position backwards "
          "(found by floodmark chaos run); UNKNOWN_LEADER_EPOCH is retriable and refreshes "
          "metadata instead."),
    Known("describe_quorum:v*.topics[0].partitions[0].leader_epoch_at_least_one",
          "A lone floodmark broker runs its controller in process and holds no election: the "
          "metadata quorum's epoch is 0 (as a lone controller's describe_quorum); Kafka's "
          "single voter elects itself at epoch 1, and again at every start. A controller "
          "quorum (cluster up --controllers 3) answers its Raft epoch."),
    Known("describe_quorum:v2.nodes.length",
          "A lone floodmark broker's controller runs in process with no listener of its own, "
          "so DescribeQuorum v2 lists no voter endpoint; a cluster's controllers are listed "
          "with their addresses under the listener name CONTROLLER."),
    # -- the test harness, not floodmark ----------------------------------------------------------
    Known("describe_configs:broker_keys.*[name=group.initial.rebalance.delay.ms]*",
          "Harness: the Kafka node sets group.initial.rebalance.delay.ms=0 in its "
          "server.properties (STATIC_BROKER_CONFIG); the floodmark broker runs on defaults."),
    Known("describe_configs:broker_keys.*[name=num.partitions]*",
          "Harness: the Kafka node sets num.partitions=1 in server.properties (STATIC)."),
    Known("describe_configs:broker_keys.*[name=node.id]*",
          "Harness: node.id is in the Kafka node's server.properties (STATIC); floodmark takes "
          "it from a default (DEFAULT_CONFIG)."),
    # -- floodmark gaps (where the fix goes) ------------------------------------------------------
    Known("*[name=num.partitions].synonyms.length",
          "Harness: Kafka lists the STATIC value and the default; floodmark only the default."),
    Known("*[name=group.initial.rebalance.delay.ms]*",
          "Harness: the Kafka node sets group.initial.rebalance.delay.ms=0."),
    Known("describe_configs:broker_keys.*[name=broker.id]",
          "floodmark has node.id only; Kafka still answers broker.id (its synonym)."),
    Known("describe_configs:broker_keys.*[name=offsets.topic.replication.factor]",
          "floodmark's __consumer_offsets replication is not a broker setting."),
    Known("incremental_alter_configs:broker_dynamic.*",
          "log.cleaner.threads is not a floodmark setting (unknown: INVALID_REQUEST)."),
]


def explain(d: Difference) -> Known | None:
    return next((k for k in KNOWN if k.matches(d)), None)
