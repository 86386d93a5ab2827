"""One replica's view of a partition, asked of the broker that holds it: log end offset, high
watermark, log start offset and leader-epoch cache (``topic describe``, ``cluster describe``).

Any replica answers ListOffsets and OffsetsForLeaderEpoch from its own log when asked with the
debug replica id (-2); the epoch cache is rebuilt by walking OffsetsForLeaderEpoch over epochs
0..current: each answered epoch starts where the previous one ended.
"""

from __future__ import annotations

from typing import Any

from floodmark.client.connection import KafkaConnection

DEBUG_REPLICA_ID = -2
LATEST, EARLIEST = -1, -2


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
    out = []
    start = log_start_offset
    for epoch in sorted(ends):
        out.append((epoch, start))
        start = ends[epoch]
    return out


def replica_state(address: str, topic: str, partition: int, max_epoch: int) -> dict[str, Any]:
    """``{"log_end_offset", "high_watermark", "log_start_offset", "epoch_cache": [[e, o]...]}``
    of the replica on the broker at ``address``."""

    def offsets(conn: KafkaConnection, ts: int, isolation: int) -> int:
        resp = conn.request(2, 7, {"replica_id": DEBUG_REPLICA_ID, "isolation_level": isolation,
                                   "topics": [{"name": topic, "partitions": [
                                       {"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": ts}]}]})
        part = resp.topics[0].partitions[0]
        if int(part.error_code):
            raise RuntimeError(f"{address}: ListOffsets error {int(part.error_code)}")
        return int(part.offset)

    with KafkaConnection(address, timeout_s=5) as conn:
        leo = offsets(conn, LATEST, 0)
        hw = offsets(conn, LATEST, 1)
        start = offsets(conn, EARLIEST, 0)
        cache = epoch_cache(conn, topic, partition, max_epoch, start)
    return {"log_end_offset": leo, "high_watermark": hw, "log_start_offset": start,
            "epoch_cache": [[e, o] for e, o in cache]}
