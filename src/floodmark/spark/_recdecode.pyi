"""Types of the compiled record decoder (``_recdecode.c``; see decode.py)."""

from collections.abc import Sequence

from floodmark.records import Buffer

ABI_VERSION: int

def decode(
    batches: Sequence[tuple[Buffer, int, int, int, int]],
    start: int,
    end: int,
    include_headers: bool,
    /,
) -> tuple[int, bytes, bytes, bytes, bytes | None, bytes, bytes, bytes | None, bytes, bytes,
           tuple[int, bytes, bytes, bytes, bytes | None, bytes, bytes] | None]: ...
