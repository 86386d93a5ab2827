"""The records every compat test produces and expects back, exactly."""

from __future__ import annotations

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BIG_VALUE = bytes(range(256)) * 4096  # 1 MiB
TOPIC_CONFIGS = {"max.message.bytes": "2097152"}
Message = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


def messages(tag: str, n: int = 25) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        key = None if i % 5 == 4 else f"{tag}-key-{i}".encode()
        value = None if (i % 7 == 3 and key is not None) else f"{tag}-value-{i}-".encode() * (1 + i % 4)
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 == 0:
            headers = (("trace", f"t{i}".encode()), ("empty", b""))
        out.append((key, value, headers))
    return out


def all_messages(tag: str) -> list[Message]:
    out: list[Message] = []
    for codec in CODECS:
        out.extend(messages(f"{tag}-{codec}"))
    out.append((f"{tag}-big".encode(), BIG_VALUE, (("size", b"1MiB"),)))
    return out


def canonical(msgs: list[Message]) -> list[Message]:
    """Order-independent form (partitioning spreads records across partitions)."""
    return sorted(msgs, key=lambda m: (m[0] or b"", m[1] or b"", m[2]))
