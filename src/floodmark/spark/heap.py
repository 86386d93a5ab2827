"""Keep freed memory in a Spark Python worker's heap instead of handing it back to the kernel.

Decoding a Fetch response allocates and frees a few megabytes of numpy and Arrow buffers (the
records laid end to end, then one column after another). With glibc's defaults each buffer of
more than 128 KiB is a fresh ``mmap`` (or a heap growth that the next ``free`` trims again), so
every response pays its page faults anew: 17,600 minor faults and a third of the decoder's CPU
time for 400,000 rows of 100 bytes (see docs/spark.md, "Where the time goes").
``keep_freed_memory`` raises glibc's mmap and trim thresholds once per process (``mallopt``: what
``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` do from the environment), so freed
pages are reused by the next response. The price: the worker keeps up to ``TRIM_THRESHOLD_BYTES``
of freed memory. With any other C library nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import platform

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Blocks below this come from the heap (glibc's own ceiling for its dynamic threshold)."""
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024
"""Free memory at the top of the heap up to this is kept for the next allocations."""


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process, once; False where the C library
    is not glibc (nothing done)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    if not ok:
        log.info("mallopt refused the mmap/trim thresholds; decoding pays page faults")
    return ok
