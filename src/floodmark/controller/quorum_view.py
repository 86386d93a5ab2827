"""DescribeQuorum's view of the metadata quorum (``__cluster_metadata``), as a broker answers it:
Kafka's brokers forward DescribeQuorum to the active controller, whose Raft leader answers with
its epoch, high watermark and what it knows of every voter and observer (KIP-595, KIP-836;
KIP-853 adds directory ids and the voters' endpoints). floodmark's controllers answer the
``describe_quorum`` call (``controller/server.py``); ``from_controller`` turns that answer into
this value, which the broker's handler puts on the wire.

Observers are the brokers that are not voters (each learns the metadata log as Kafka's brokers
fetch it as observers): their log end offset is the metadata offset their last heartbeat
reported, their last fetch that heartbeat. A replica's last caught-up time is its last fetch
when it had the leader's log end offset then, else unknown (-1): floodmark's quorum keeps no
older one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from floodmark.address import parse_host_port

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
CONTROLLER_LISTENER = "CONTROLLER"
"""The listener name a voter's endpoint is given under (Kafka's usual
``controller.listener.names``): floodmark's controllers have one listener each."""


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp_ms: int = -1  # wall clock; -1: unknown
    last_caught_up_timestamp_ms: int = -1
    directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    node_id: int
    host: str
    port: int
    listener: str = CONTROLLER_LISTENER


@dataclass(frozen=True, slots=True)
class QuorumView:
    """The Raft leader's view of the metadata quorum."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaProgress, ...]
    observers: tuple[ReplicaProgress, ...] = ()
    endpoints: tuple[VoterEndpoint, ...] = ()


def is_leader_answer(answer: dict[str, Any]) -> bool:
    """A controller's ``describe_quorum`` answer is the leader's own (the view to forward)."""
    return str(answer.get("role")) == "leader"


def from_controller(answer: dict[str, Any], now_ms: int) -> QuorumView:
    """The leader controller's ``describe_quorum`` answer as of ``now_ms`` (wall clock): its
    durations ago become timestamps."""
    leader_id = int(answer["leader_id"])
    leader_end = int(answer.get("log_end_offset", answer["high_watermark"]))

    def progress(replica_id: int, end: int, ago_ms: Any, directory: Any = None
                 ) -> ReplicaProgress:
        if replica_id == leader_id:  # the leader itself: now, as Kafka's leader answers
            fetched = now_ms
        else:
            fetched = now_ms - int(ago_ms) if ago_ms is not None else -1
        caught_up = fetched if fetched >= 0 and end >= leader_end else -1
        return ReplicaProgress(replica_id, end, fetched, caught_up,
                               uuid.UUID(directory) if directory else None)

    voters = tuple(progress(int(v["voter_id"]), int(v["log_end_offset"]),
                            v.get("last_fetch_ms_ago"), v.get("directory_id"))
                   for v in answer.get("voters") or ())
    voter_ids = {v.replica_id for v in voters}
    observers = tuple(progress(int(b["broker_id"]), int(b["metadata_offset"]),
                               b.get("last_heartbeat_ms_ago"))
                      for b in answer.get("brokers") or ()
                      if int(b["broker_id"]) not in voter_ids and b.get("metadata_offset")
                      is not None)
    # Controllers fetching outside the voter set (KIP-853: one waiting to be added, one
    # removed), as Kafka's leader lists them among the observers.
    observers += tuple(progress(int(o["voter_id"]), int(o["log_end_offset"]),
                                o.get("last_fetch_ms_ago"), o.get("directory_id"))
                       for o in answer.get("observers") or ()
                       if int(o["voter_id"]) not in voter_ids)
    endpoints = []
    for node, address in sorted((answer.get("voter_endpoints") or {}).items()):
        host, port = parse_host_port(str(address))
        endpoints.append(VoterEndpoint(int(node), host, port))
    return QuorumView(leader_id, int(answer["leader_epoch"]), int(answer["high_watermark"]),
                      voters, observers, tuple(endpoints))
