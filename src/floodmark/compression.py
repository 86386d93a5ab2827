"""Record-batch compression codecs (attributes bits 0-2 of a v2 batch), via ``cramjam``.

Kafka clients write:
- gzip: an ordinary gzip stream.
- snappy: the Java client (snappy-java ``SnappyOutputStream``) and kafka-python write the *xerial*
  framing (magic ``\\x82SNAPPY\\x00``, two int32 versions, then blocks of int32 length + raw snappy);
  librdkafka writes one raw snappy block. We decode both (sniffing the xerial magic) and encode
  with the xerial framing, which every client can read.
- lz4: the standard LZ4 frame format (magic 2 batches; the broken header checksum of old magic 0/1
  messages does not apply). We encode frames without the content-size field, as Java does.
- zstd: an ordinary zstd frame.
"""

from __future__ import annotations

import enum
import struct

import cramjam

from floodmark.errors import FloodmarkError


class Compression(enum.IntEnum):
    """Kafka's compression codec ids (record batch attributes, bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str | int | Compression) -> Compression:
        """Accept Kafka's ``compression.type`` names (``none``, ``gzip``...) or ids."""
        if isinstance(name, Compression):
            return name
        if isinstance(name, int):
            return cls(name)
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown compression type {name!r}") from None


class CompressionError(FloodmarkError, ValueError):
    """Compressed data could not be decoded."""


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")
XERIAL_BLOCK_BYTES = 32 * 1024


def _snappy_xerial_encode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    for start in range(0, len(view), XERIAL_BLOCK_BYTES):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_BYTES]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decode(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if len(view) >= _XERIAL_HEADER.size and bytes(view[:8]) == XERIAL_MAGIC:
        pos = _XERIAL_HEADER.size
        out = bytearray()
        while pos < len(view):
            if pos + 4 > len(view):
                raise CompressionError("truncated xerial snappy block length")
            (block_len,) = _INT32.unpack_from(view, pos)
            pos += 4
            if block_len < 0 or pos + block_len > len(view):
                raise CompressionError("truncated xerial snappy block")
            out += bytes(cramjam.snappy.decompress_raw(view[pos : pos + block_len]))
            pos += block_len
        return bytes(out)
    return bytes(cramjam.snappy.decompress_raw(view))


def _lz4_encode(data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


def compress(codec: Compression, data: bytes | bytearray | memoryview,
             level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka clients do for ``codec``; ``level`` is KIP-390's
    (gzip 1-9, lz4 1-17, zstd -131072-22; None: the codec's default; snappy has none)."""
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(bytes(data), level=level))
    if codec is Compression.SNAPPY:
        return _snappy_xerial_encode(data)
    if codec is Compression.LZ4:
        return _lz4_encode(data, level)
    if codec is Compression.ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level=3 if level is None else level))
    raise CompressionError(f"unsupported compression codec {codec!r}")


def decompress(codec: Compression, data: bytes | bytearray | memoryview) -> bytes:
    """Inverse of :func:`compress`; also reads raw snappy (librdkafka). Raises CompressionError."""
    try:
        if codec is Compression.NONE:
            return bytes(data)
        if codec is Compression.GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec is Compression.SNAPPY:
            return _snappy_decode(data)
        if codec is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec is Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CompressionError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError / ValueError types
        raise CompressionError(
            f"{codec.name.lower()} data could not be decompressed: {exc}"
        ) from exc
    raise CompressionError(f"unsupported compression codec {codec!r}")
