"""One replica's view of a partition, asked of the broker that holds it: log end offset, high
watermark, log start offset and leader-epoch cache (``topic describe``, ``cluster describe``, the
dashboard), and what a leader knows of its followers (their remote LEOs).

Any replica answers ListOffsets and OffsetsForLeaderEpoch from its own log when asked with the
debug replica id (-2); the epoch cache is rebuilt by walking OffsetsForLeaderEpoch over epochs
0..current: each answered epoch starts where the previous one ended. A leader answers
DescribeQuorum for any partition it leads (a debug read, not advertised in ApiVersions) with the
LEO it has learned for each replica.
"""

from __future__ import annotations

from typing import Any

from floodmark.client.connection import KafkaConnection
from floodmark.constants import DEBUG_REPLICA_ID
from floodmark.security import PLAINTEXT, ClientSecurity

PartitionKey = tuple[str, int]


def _cache_from_ends(ends: dict[int, int], log_start_offset: int) -> list[tuple[int, int]]:
    """[(epoch, start offset)] from each epoch's end offset: an epoch starts where the previous
    one ended, the first at the log start."""
    out = []
    start = log_start_offset
    for epoch in sorted(ends):
        out.append((epoch, start))
        start = ends[epoch]
    return out


def epoch_cache(conn: KafkaConnection, topic: str, partition: int, max_epoch: int,
                log_start_offset: int) -> list[tuple[int, int]]:
    """[(epoch, start offset)] of the replica ``conn`` reaches, for epochs 0..``max_epoch``."""
    if max_epoch < 0:
        return []
    resp = conn.request(23, 4, {"replica_id": DEBUG_REPLICA_ID, "topics": [
        {"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "leader_epoch": e}
            for e in range(max_epoch + 1)]}]})
    ends = {int(p.leader_epoch): int(p.end_offset) for p in resp.topics[0].partitions
            if int(p.error_code) == 0 and int(p.leader_epoch) >= 0}
    return _cache_from_ends(ends, log_start_offset)


def read_replica_state(address: str, topic: str, partition: int, max_epoch: int,
                  security: ClientSecurity = PLAINTEXT) -> dict[str, Any]:
    """``{"log_end_offset", "high_watermark", "log_start_offset", "epoch_cache": [[e, o]...]}``
    of the replica on the broker at ``address``."""
    answer = replica_states(address, [(topic, partition, max_epoch)],
                            security=security)[(topic, partition)]
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def replica_states(address: str, partitions: list[tuple[str, int, int]],
                   timeout_s: float = 5.0, security: ClientSecurity = PLAINTEXT
                   ) -> dict[PartitionKey, dict[str, Any]]:
    """``replica_state`` for many partitions of one broker in four ListOffsets and one
    OffsetsForLeaderEpoch request (one connection). Each answer is the replica's
    ``{"log_end_offset", "high_watermark", "log_start_offset", "epoch_cache",
    "last_stable_offset"}`` or
    ``{"error": text}``; ``max_epoch`` is the highest leader epoch whose end offset is asked."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, partition, max_epoch in partitions:
        by_topic.setdefault(topic, []).append((partition, max_epoch))

    def offsets(conn: KafkaConnection, ts: int, isolation: int) -> dict[PartitionKey, int | str]:
        resp = conn.request(2, 7, {"replica_id": DEBUG_REPLICA_ID, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                            "timestamp": ts} for p, _e in parts]}
            for topic, parts in by_topic.items()]})
        return {(t.name, int(p.partition_index)):
                (f"{address}: ListOffsets error {int(p.error_code)}" if int(p.error_code)
                 else int(p.offset))
                for t in resp.topics for p in t.partitions}

    with KafkaConnection(address, timeout_s=timeout_s, security=security) as conn:
        leo = offsets(conn, -1, 0)
        hw = offsets(conn, -1, 1)
        lso = offsets(conn, -1, 2)  # floodmark's debug read of the last stable offset
        start = offsets(conn, -2, 0)
        resp = conn.request(23, 4, {"replica_id": DEBUG_REPLICA_ID, "topics": [
            {"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "leader_epoch": e}
                for p, max_epoch in parts for e in range(max_epoch + 1)]}
            for topic, parts in by_topic.items()]})
    ends: dict[PartitionKey, dict[int, int]] = {}
    for t in resp.topics:
        for p in t.partitions:
            if int(p.error_code) == 0 and int(p.leader_epoch) >= 0:
                ends.setdefault((t.topic, int(p.partition)), {})[int(p.leader_epoch)] = int(
                    p.end_offset)
    out: dict[PartitionKey, dict[str, Any]] = {}
    for topic, partition, _max_epoch in partitions:
        key = (topic, partition)
        values = (leo.get(key), hw.get(key), start.get(key))
        bad = next((v for v in values if not isinstance(v, int)), None)
        if bad is not None:
            out[key] = {"error": str(bad) if isinstance(bad, str) else f"{address}: no answer"}
            continue
        cache = [[e, o] for e, o in _cache_from_ends(ends.get(key, {}), int(values[2] or 0))]
        out[key] = {"log_end_offset": values[0], "high_watermark": values[1],
                    "log_start_offset": values[2], "epoch_cache": cache}
        stable = lso.get(key)
        if isinstance(stable, int):
            out[key]["last_stable_offset"] = stable
    return out


def leader_views(address: str, partitions: list[PartitionKey],
                 timeout_s: float = 5.0, security: ClientSecurity = PLAINTEXT
                 ) -> dict[PartitionKey, dict[str, Any]]:
    """What the leader on ``address`` knows of each replica of these partitions, read with
    DescribeQuorum (a debug read floodmark answers for any partition it leads):
    ``{"leader", "leader_epoch", "high_watermark", "log_end_offsets": {replica: LEO}}`` where a
    follower's LEO is the leader's *remote LEO* for it (-1 = not yet known), or
    ``{"error": text}`` (e.g. NOT_LEADER_OR_FOLLOWER from a broker that no longer leads)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    with KafkaConnection(address, timeout_s=timeout_s, security=security) as conn:
        resp = conn.request(55, 1, {"topics": [
            {"topic_name": topic, "partitions": [{"partition_index": p} for p in parts]}
            for topic, parts in by_topic.items()]})
    out: dict[PartitionKey, dict[str, Any]] = {}
    for t in resp.topics:
        for p in t.partitions:
            key = (str(t.topic_name), int(p.partition_index))
            if int(p.error_code):
                out[key] = {"error": f"{address}: DescribeQuorum error {int(p.error_code)}"}
                continue
            out[key] = {"leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
                        "high_watermark": int(p.high_watermark),
                        "log_end_offsets": {int(r.replica_id): int(r.log_end_offset)
                                            for r in [*p.current_voters, *p.observers]}}
    return out
