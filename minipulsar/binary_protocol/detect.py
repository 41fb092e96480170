"""Which protocol a new connection speaks, from its first five bytes. Sans-IO.

The broker serves minipulsar's clients and Pulsar's official ones on one port. Both frame
with a big-endian ``uint32`` length first, so byte 4 — the first byte of the body — decides:

- minipulsar: the body is a msgpack map, whose first byte is a fixmap (``0x80``–``0x8f``),
  a map 16 (``0xde``) or a map 32 (``0xdf``);
- Pulsar: the body starts with ``commandSize``, a ``uint32`` whose first byte is ``0x00``
  for any command below 16 MiB (a frame is at most a few MiB), and holds at least
  :data:`MIN_PULSAR_FRAME_SIZE` bytes.

A frame shorter than :data:`MIN_PULSAR_FRAME_SIZE` (an empty one's byte 4 belongs to the next
frame), or one that looks like Pulsar's but is above the broker's maximum frame size, is left
to minipulsar's codec, which refuses it as it always has (InvalidCommand, TooLarge).

Anything else is neither, and the connection is refused rather than guessed at.
"""

from __future__ import annotations

from typing import Literal

from minipulsar.errors import MalformedCommandError

Protocol = Literal["pulsar", "minipulsar"]

SNIFF_BYTES = 5
"""Bytes :func:`sniff` needs: the length prefix and the body's first byte."""

MIN_PULSAR_FRAME_SIZE = 6
"""The smallest Pulsar ``totalSize``: ``commandSize`` and a ``BaseCommand`` holding its type."""


def sniff(prefix: bytes | bytearray | memoryview, max_frame_size: int) -> Protocol | None:
    """The protocol of a connection whose first bytes are ``prefix``; ``None`` while fewer
    than :data:`SNIFF_BYTES` have arrived. ``max_frame_size`` is the broker's limit on a frame.

    Raises:
        MalformedCommandError: the bytes start a frame of neither protocol.
    """
    if len(prefix) < SNIFF_BYTES:
        return None
    first = prefix[4]
    length = int.from_bytes(prefix[:4], "big")
    if 0x80 <= first <= 0x8F or first in (0xDE, 0xDF) or length < MIN_PULSAR_FRAME_SIZE:
        return "minipulsar"
    if first == 0x00:
        return "pulsar" if length <= max_frame_size else "minipulsar"
    raise MalformedCommandError(
        f"neither a minipulsar nor a Pulsar frame: the connection starts {bytes(prefix[:SNIFF_BYTES]).hex(' ')}"
    )
