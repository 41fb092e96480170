"""Goal: every codec of Pulsar's CompressionType round-trips, LZ4/ZLIB/ZSTD are the bytes
minipulsar's own codecs write, and decompression is bounded: a forged size, a bomb or corrupt
input raises MalformedCommandError before (or instead of) allocating it.

Method: compress a seeded random-but-compressible payload with each codec and read it back;
then lie about sizes and flip bytes.
"""

from __future__ import annotations

import random

import cramjam
import pytest

from minipulsar.binary_protocol import compression
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression as ours
from minipulsar.protocol.compression import UNCOMPRESSED_BYTES_MAX

CODECS = [api.NONE, api.LZ4, api.ZLIB, api.ZSTD, api.SNAPPY]
COMPRESSING = CODECS[1:]


def compressible(size: int, seed: int = 11) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.randrange(97, 123) for _ in range(rng.randint(3, 9))) for _ in range(50)]
    text = b" ".join(rng.choice(words) for _ in range(size // 4))
    return text[:size]


@pytest.mark.parametrize("codec", CODECS, ids=compression.codec_name)
@pytest.mark.parametrize("size", [0, 1, 1000, 200_000])
def test_every_codec_round_trips(codec: int, size: int) -> None:
    data = compressible(size)
    compressed = compression.compress(codec, data)
    if codec != api.NONE and size >= 1000:
        assert len(compressed) < len(data)
    assert compression.decompress(codec, compressed, len(data)) == data


@pytest.mark.parametrize("codec", [api.LZ4, api.ZLIB, api.ZSTD], ids=compression.codec_name)
def test_the_codecs_both_protocols_have_write_the_same_bytes(codec: int) -> None:
    data = compressible(5000)
    name = compression.OURS[codec]
    assert compression.compress(codec, data) == ours.compress(name, data)
    assert compression.CODEC_OF_OURS[name] == codec


def test_snappy_is_the_raw_block_format() -> None:
    """A varint of the length first, no stream identifier (what snappy::Compress writes)."""
    data = compressible(300)
    compressed = compression.compress(api.SNAPPY, data)
    assert compressed[:2] == bytes([0x80 | (300 & 0x7F), 300 >> 7])
    assert bytes(cramjam.snappy.decompress_raw(compressed)) == data


@pytest.mark.parametrize("codec", COMPRESSING, ids=compression.codec_name)
def test_a_size_above_the_bound_is_refused_before_inflating(codec: int) -> None:
    with pytest.raises(MalformedCommandError, match="out of bounds"):
        compression.decompress(codec, compression.compress(codec, b"x"), UNCOMPRESSED_BYTES_MAX + 1)
    with pytest.raises(MalformedCommandError, match="out of bounds"):
        compression.decompress(codec, b"", -1)


@pytest.mark.parametrize("codec", COMPRESSING, ids=compression.codec_name)
def test_a_bomb_inflates_no_further_than_its_announced_size(codec: int) -> None:
    """64 MiB of zeros compress to a few KiB; a metadata claiming 1 KiB gets an error."""
    bomb = compression.compress(codec, bytes(UNCOMPRESSED_BYTES_MAX))
    with pytest.raises(MalformedCommandError):
        compression.decompress(codec, bomb, 1024)


@pytest.mark.parametrize("codec", CODECS, ids=compression.codec_name)
def test_a_wrong_uncompressed_size_is_refused(codec: int) -> None:
    data = compressible(1000)
    with pytest.raises(MalformedCommandError):
        compression.decompress(codec, compression.compress(codec, data), len(data) + 1)


@pytest.mark.parametrize("codec", COMPRESSING, ids=compression.codec_name)
def test_corrupt_input_raises_only_malformed_command(codec: int) -> None:
    data = compressible(2000)
    compressed = compression.compress(codec, data)
    rng = random.Random(codec)
    for _ in range(50):
        corrupt = bytearray(compressed)
        for _ in range(rng.randint(1, 4)):
            corrupt[rng.randrange(len(corrupt))] = rng.randrange(256)
        try:
            result = compression.decompress(codec, bytes(corrupt), len(data))
        except MalformedCommandError:
            continue
        assert len(result) == len(data)  # LZ4 and SNAPPY have no checksum: wrong bytes, right size


def test_unknown_codecs_are_refused() -> None:
    with pytest.raises(ValueError, match="CompressionType"):
        compression.compress(9, b"x")
    with pytest.raises(MalformedCommandError, match="unknown compression codec CompressionType\\(9\\)"):
        compression.decompress(9, b"x", 1)
    assert compression.codec_name(api.ZSTD) == "ZSTD"


def test_a_snappy_block_without_a_length_prefix_is_refused() -> None:
    with pytest.raises(MalformedCommandError, match="length prefix"):
        compression.decompress(api.SNAPPY, b"\xff\xff\xff\xff\xff\xff", 10)
    with pytest.raises(MalformedCommandError, match="length prefix"):
        compression.decompress(api.SNAPPY, b"", 0)
