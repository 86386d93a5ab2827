"""spark/heap.py: after keep_freed_memory, a worker's freed buffers are reused, not faulted in
again (the page faults that took a third of the decoder's CPU time)."""

from __future__ import annotations

import platform
import resource

import numpy as np
import pytest

from floodmark.spark.heap import keep_freed_memory


def _faults_of_rounds(rounds: int, buffers: int, size_bytes: int) -> int:
    """Minor page faults of ``rounds`` rounds that each fill ``buffers`` buffers, then free them
    all (what decoding one Fetch answer does, column after column)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(rounds):
        held = []
        for _ in range(buffers):
            buf = np.empty(size_bytes, dtype=np.uint8)
            buf[:] = i  # touch every page
            held.append(buf)
        del held
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_buffers_are_reused_without_page_faults() -> None:
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # once per process; a second call changes nothing
    _faults_of_rounds(1, 12, 2 << 20)  # the heap grows once
    pages = 10 * 12 * (2 << 20) // 4096
    # with glibc's defaults the 24 MiB freed at the end of each round are handed back (trimmed)
    # and faulted in again by the next: ~6,100 faults a round, 61,440 here
    assert _faults_of_rounds(10, 12, 2 << 20) < pages // 20
