"""Compression codecs of a batch's messages (Pulsar's ``CompressionType``), sans-IO.

Pulsar compresses the batch payload — every message of an entry together — and writes the
codec and the uncompressed size into the entry's metadata, so the reader can size its buffer
and refuse a decompression bomb before inflating anything. The same here: the producer
compresses, the consumer (and the broker, when it must look inside an entry: deduplication
replay, non-persistent keys) decompresses; bookies never look.

- ``LZ4``: a raw LZ4 block (no frame, no stored size), as Pulsar's ``CompressionCodecLZ4``;
- ``ZSTD``: a zstd frame at level 3 (Pulsar's ``ZSTD_COMPRESSION_LEVEL``);
- ``ZLIB``: a zlib stream (the standard library's, Pulsar's default level).

``SNAPPY`` is named by Pulsar but needs a library this project does not ship: refused with a
clear error rather than silently sent uncompressed.
"""

from __future__ import annotations

import zlib
from typing import Final, Literal

import lz4.block
import zstandard

from minipulsar.errors import MalformedCommandError

CompressionCodec = Literal["NONE", "LZ4", "ZLIB", "ZSTD"]
"""A batch's codec as the entry names it: what this build can write and read."""

NONE: Final = "NONE"
LZ4: Final = "LZ4"
ZLIB: Final = "ZLIB"
ZSTD: Final = "ZSTD"
SNAPPY: Final = "SNAPPY"
CODECS: Final[tuple[CompressionCodec, ...]] = (NONE, LZ4, ZLIB, ZSTD)

ZSTD_LEVEL = 3  # Pulsar: CompressionCodecZstd.ZSTD_COMPRESSION_LEVEL
UNCOMPRESSED_BYTES_MAX = 64 * 1024 * 1024
"""Largest uncompressed batch accepted from the wire: far above a 5 MiB frame of real data,
low enough that a forged size cannot make a reader allocate without bound."""

_zstd_compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
_zstd_decompressor = zstandard.ZstdDecompressor()


def check_codec(codec: str) -> CompressionCodec:
    """``codec`` normalised to its upper-case name.

    Raises:
        ValueError: not a codec this build supports (e.g. SNAPPY).
    """
    name = codec.upper()
    for known in CODECS:
        if name == known:
            return known
    if name == SNAPPY:
        raise ValueError(
            "SNAPPY compression needs python-snappy, which minipulsar does not ship; use LZ4, ZSTD or ZLIB"
        )
    raise ValueError(f"unknown compression type {codec!r}; use one of {', '.join(CODECS)}")


def compress(codec: CompressionCodec, data: bytes) -> bytes:
    """``data`` compressed with ``codec`` (not NONE)."""
    if codec == LZ4:
        compressed: bytes = lz4.block.compress(data, store_size=False)
        return compressed
    if codec == ZSTD:
        return _zstd_compressor.compress(data)
    if codec == ZLIB:
        return zlib.compress(data)
    raise ValueError(f"cannot compress with {codec!r}")


def codec_of_entry(name: object) -> CompressionCodec:
    """The codec a compressed batch names (never NONE: a plain batch has no codec field).

    Raises:
        MalformedCommandError: not a codec this build reads.
    """
    for known in CODECS:
        if name == known and known != NONE:
            return known
    raise MalformedCommandError(f"unknown compression codec {repr(name)[:80]}")


def decompress(codec: CompressionCodec, data: bytes, uncompressed_size: int) -> bytes:
    """Inverse of :func:`compress`; the result must be exactly ``uncompressed_size`` bytes.

    Raises:
        MalformedCommandError: unknown codec, size out of bounds, or corrupt data.
    """
    if not 0 <= uncompressed_size <= UNCOMPRESSED_BYTES_MAX:
        raise MalformedCommandError(f"uncompressed batch size {uncompressed_size} is out of bounds")
    result: bytes
    try:
        if codec == LZ4:
            result = lz4.block.decompress(data, uncompressed_size=uncompressed_size)
        elif codec == ZSTD:
            result = _zstd_decompressor.decompress(data, max_output_size=uncompressed_size)
        elif codec == ZLIB:
            inflater = zlib.decompressobj()
            result = inflater.decompress(data, uncompressed_size)
        else:
            raise MalformedCommandError(f"unknown compression codec {codec!r}")
    except (lz4.block.LZ4BlockError, zstandard.ZstdError, zlib.error) as exc:  # each library's corrupt input
        raise MalformedCommandError(f"corrupt {codec} data: {exc}") from exc
    if len(result) != uncompressed_size:
        raise MalformedCommandError(f"{codec} data inflated to {len(result)} bytes, not {uncompressed_size}")
    return result
