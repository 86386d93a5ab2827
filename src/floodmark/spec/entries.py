"""A replica's log as both checkers show it: (offset, epoch, value) entries decoded from the
bytes the storage holds; a record's value as text, a transaction marker as ``COMMIT(p7)``."""

from __future__ import annotations

from floodmark.records import decode_batch, iter_batches, read_end_txn_marker

Entry = tuple[int, str]  # (leader epoch stamped in the batch, value)


def marker_label(producer_id: int, committed: bool) -> str:
    """How a transaction marker shows in a log's entries and the step tables."""
    return f"{'COMMIT' if committed else 'ABORT'}(p{producer_id})"


def is_marker_label(value: str) -> bool:
    return value.startswith(("COMMIT(", "ABORT("))


def decode_entries(buffer: bytes | bytearray | memoryview) -> list[tuple[int, int, str]]:
    """(offset, epoch, value) for every record in a run of batches (a marker as its label)."""
    out: list[tuple[int, int, str]] = []
    for position, header in iter_batches(buffer, validate=False):
        _, records = decode_batch(buffer, position, validate=False)
        epoch = header.partition_leader_epoch
        if header.is_control:
            committed = read_end_txn_marker(header).committed
            label = marker_label(header.producer_id, committed)
            out.extend((r.offset, epoch, label) for r in records)
            continue
        for record in records:
            value = record.value.decode() if record.value is not None else ""
            out.append((record.offset, epoch, value))
    return out
