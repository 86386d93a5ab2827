"""Kafka's default partitioner for keyed records: murmur2 of the key, made positive, modulo the
partition count — the Java client's ``Utils.murmur2`` / ``toPositive``, librdkafka's
``murmur2_random`` and floodmark's Spark sink agree, so a key lands in one partition whichever
of them wrote it."""

from __future__ import annotations

import functools
import struct

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit murmur2 as Kafka computes it (signed result)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length - length % 4
    for k in _words(end // 4).unpack_from(data):  # little-endian 4-byte words, as Kafka reads
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@functools.cache
def _words(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions
