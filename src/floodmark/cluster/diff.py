"""Data-dir diffing: which records of one broker's copy of a partition are missing from, or
different in, another's (read from the segment files, read-only; e.g. what an unclean election
lost)."""

from __future__ import annotations

import re
from pathlib import Path


def read_partition_values(partition_dir: str | Path) -> dict[int, bytes | None]:
    """offset -> value of every record in a partition directory's segment files (read-only)."""
    from floodmark.records import decode_batch, iter_batches

    values: dict[int, bytes | None] = {}
    for seg in sorted(Path(partition_dir).glob("*.log")):
        data = seg.read_bytes()
        for pos, _h in iter_batches(data, validate=False):
            _header, records = decode_batch(memoryview(data)[pos:], validate=False)
            for r in records:
                values[r.offset] = r.value
    return values


def lost_offsets(old_dir: str | Path, new_dir: str | Path, upto: int) -> list[int]:
    """Offsets below ``upto`` (e.g. the old leader's HW) whose record in ``old_dir`` is missing
    from, or different in, ``new_dir``: what an unclean election threw away."""
    old = read_partition_values(old_dir)
    new = read_partition_values(new_dir)
    return sorted(o for o, v in old.items() if o < upto and new.get(o, b"\0missing") != v)


def partitions_on_disk(broker_dir: str | Path, topic: str) -> list[int]:
    """The partitions of ``topic`` a broker's data directory holds (``TOPIC-N`` directories)."""
    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)$")
    root = Path(broker_dir)
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for d in root.iterdir()
                  if d.is_dir() and (m := pattern.match(d.name)))


def offset_runs(offsets: list[int]) -> list[str]:
    """[3, 4, 5, 9] -> ["3-5", "9"]."""
    runs: list[str] = []
    if not offsets:
        return runs
    start = prev = offsets[0]
    for o in [*offsets[1:], None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    return runs
