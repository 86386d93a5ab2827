"""Does a cluster serve its clients? Asked the way a client asks: a Metadata request (all
topics) to every broker that should be up.

A cluster serves when each of those brokers answers, lists every one of them, and names, for
every partition of every topic, a leader among them (``in_sync``: and an ISR holding every
replica). ``wait_serving`` waits for that on progress: it fails only when neither the answers
nor the processes' CPU time and log output move for ``stall_ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from floodmark.client import KafkaConnection, RequestFailed
from floodmark.cluster import LIMIT_S, STALL_MS, Stalled, wait_progress

API_METADATA = 3
METADATA_VERSION = 12
ASK_TIMEOUT_S = 5.0


class NotServing(AssertionError):
    """The cluster stopped making progress towards serving (or took longer than the bound);
    the message says what was still missing. An AssertionError, so pytest reports it as a
    failed test rather than an error in the test's machinery."""


def serving_problem(brokers: Mapping[int, str], *, in_sync: bool = False) -> str | None:
    """What keeps the cluster of ``brokers`` (node id -> ``host:port``, the ones that should be
    up) from serving; None when it serves."""
    for node_id, address in sorted(brokers.items()):
        try:
            with KafkaConnection(address, timeout_s=ASK_TIMEOUT_S,
                                 client_id="floodmark-testing") as conn:
                meta: Any = conn.request(API_METADATA, METADATA_VERSION, {
                    "topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
        except (OSError, RequestFailed) as exc:
            return f"broker {node_id} ({address}) does not answer Metadata: {exc}"
        listed = {int(b.node_id) for b in meta.brokers}
        if not set(brokers) <= listed:
            return (f"broker {node_id} lists brokers {sorted(listed)}, not yet "
                    f"{sorted(set(brokers) - listed)}")
        if int(meta.controller_id) < 0:
            return f"broker {node_id} knows no active controller"
        for topic in meta.topics:
            name = str(topic.name)
            if int(topic.error_code):
                return f"topic {name}: error {int(topic.error_code)} at broker {node_id}"
            for p in topic.partitions:
                where = f"{name}-{int(p.partition_index)} (as broker {node_id} sees it)"
                leader = int(p.leader_id)
                if leader not in brokers:
                    return f"{where}: leader {leader} is not a running broker"
                if in_sync and sorted(map(int, p.isr_nodes)) != sorted(map(int, p.replica_nodes)):
                    return (f"{where}: ISR {sorted(map(int, p.isr_nodes))} lacks replicas of "
                            f"{sorted(map(int, p.replica_nodes))}")
    return None


def wait_serving(brokers: Callable[[], Mapping[int, str]],
                 progress: Callable[[], dict[str, object]], *, in_sync: bool = False,
                 stall_ms: int = STALL_MS, timeout_s: float = LIMIT_S) -> None:
    """Until ``serving_problem(brokers())`` is None; NotServing when neither the problem nor
    ``progress()`` (the processes' CPU time and log sizes) changed for ``stall_ms``, or after
    ``timeout_s`` in all."""
    problem: list[str | None] = [None]

    def serves() -> bool:
        problem[0] = serving_problem(brokers(), in_sync=in_sync)
        return problem[0] is None

    try:
        wait_progress(serves, lambda: {**progress(), "missing": problem[0]},
                      what="waiting for the cluster to serve", stall_ms=stall_ms,
                      limit_s=timeout_s, step_s=0.05)
    except Stalled as exc:
        raise NotServing(f"{exc} (last: {problem[0]})") from None
