"""Pulsar's payload codecs, by ``api.CompressionType`` value. Sans-IO.

A Pulsar producer compresses the whole payload of a SEND (every message of a batch at once)
and writes the codec and ``uncompressed_size`` into its ``MessageMetadata``. The formats are
what the official clients write (the C++ client's ``CompressionCodec*.cc``, the Java client's
``CompressionCodec*``):

- ``LZ4``: a raw LZ4 block, no frame and no stored size (``LZ4_compress_default``; the reader
  is told the size by the metadata) — the same bytes as minipulsar's own LZ4;
- ``ZLIB``: a zlib stream (header, deflate, adler32), as ``compress()`` / Java's ``Deflater``;
- ``ZSTD``: one zstd frame (``ZSTD_compress``);
- ``SNAPPY``: a raw snappy block (a varint of the uncompressed length, then the data), as
  ``snappy::Compress`` / Java's ``Snappy.compress``; not snappy's framing format.

LZ4, ZLIB and ZSTD write what :mod:`minipulsar.protocol.compression` writes (LZ4 and ZSTD
are read by it too), and its bounds hold here: ``decompress`` refuses an
``uncompressed_size`` above :data:`~minipulsar.protocol.compression.UNCOMPRESSED_BYTES_MAX`
before inflating anything, and returns exactly ``uncompressed_size`` bytes or raises
``MalformedCommandError``. A ZLIB stream must also end at that size (inflated here, see
``_zlib_decompress``), and SNAPPY's own length prefix must equal it before cramjam allocates.
"""

from __future__ import annotations

import zlib

import cramjam

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression as ours
from minipulsar.protocol.compression import UNCOMPRESSED_BYTES_MAX

OURS: dict[int, ours.CompressionCodec] = {api.LZ4: ours.LZ4, api.ZLIB: ours.ZLIB, api.ZSTD: ours.ZSTD}
"""Pulsar codecs minipulsar's own entries also use, with their name there."""
CODEC_OF_OURS: dict[str, api.CompressionType] = {ours.LZ4: api.LZ4, ours.ZLIB: api.ZLIB, ours.ZSTD: api.ZSTD}
"""The inverse of :data:`OURS`."""


def codec_name(codec: int) -> str:
    """``"LZ4"`` for ``api.LZ4`` …; a value outside the enum is named by its number."""
    try:
        name: str = api.CompressionType.Name(codec)
    except ValueError:
        return f"CompressionType({codec})"
    return name


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed with ``codec`` (``api.NONE`` returns ``data`` itself).

    Raises:
        ValueError: not a codec of ``api.CompressionType``.
    """
    if codec == api.NONE:
        return data
    if codec == api.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    name = OURS.get(codec)
    if name is None:
        raise ValueError(f"cannot compress with {codec_name(codec)}")
    return ours.compress(name, data)


def decompress(codec: int, data: bytes, uncompressed_size: int) -> bytes:
    """Inverse of :func:`compress`; the result is exactly ``uncompressed_size`` bytes.

    Raises:
        MalformedCommandError: unknown codec, a size out of bounds, or corrupt data.
    """
    if not 0 <= uncompressed_size <= UNCOMPRESSED_BYTES_MAX:
        raise MalformedCommandError(f"uncompressed payload size {uncompressed_size} is out of bounds")
    if codec == api.NONE:
        result = data
    elif codec == api.SNAPPY:
        result = _snappy_decompress(data, uncompressed_size)
    elif codec == api.ZLIB:
        result = _zlib_decompress(data, uncompressed_size)
    elif (name := OURS.get(codec)) is not None:
        result = ours.decompress(name, data, uncompressed_size)
    else:
        raise MalformedCommandError(f"unknown compression codec {codec_name(codec)}")
    if len(result) != uncompressed_size:
        raise MalformedCommandError(f"{codec_name(codec)} payload is {len(result)} bytes, not {uncompressed_size}")
    return result


def _zlib_decompress(data: bytes, uncompressed_size: int) -> bytes:
    """Inflated to at most ``uncompressed_size`` bytes, and the stream must end there:
    ``minipulsar.protocol.compression`` stops at the size and returns what it has, which
    reads a stream longer than its metadata says (a bomb, a lie) as its first bytes."""
    inflater = zlib.decompressobj()
    try:
        result = inflater.decompress(data, uncompressed_size)
    except zlib.error as exc:
        raise MalformedCommandError(f"corrupt ZLIB data: {exc}") from exc
    if not inflater.eof or inflater.unconsumed_tail:
        raise MalformedCommandError(f"ZLIB stream does not end at its {uncompressed_size} bytes")
    return result


def _snappy_decompress(data: bytes, uncompressed_size: int) -> bytes:
    announced = _snappy_length(data)
    if announced != uncompressed_size:
        raise MalformedCommandError(f"SNAPPY block announces {announced} bytes, the metadata {uncompressed_size}")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise MalformedCommandError(f"corrupt SNAPPY data: {exc}") from exc


def _snappy_length(data: bytes) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian base-128
    varint of at most 5 bytes: snappy blocks are below 4 GiB)."""
    length = 0
    for index in range(min(len(data), 5)):
        byte = data[index]
        length |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return length
    raise MalformedCommandError("SNAPPY block has no valid length prefix")
