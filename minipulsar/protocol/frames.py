"""Framing: a byte stream in, frame bodies out. Sans-IO: no sockets, no asyncio.

A frame is a ``uint32`` big-endian length followed by that many bytes of body (one msgpack
map, decoded one layer up in :mod:`minipulsar.protocol.codec`).

Invariants of :class:`FrameDecoder`:
- bytes before ``_start`` have been returned as frames and are dropped at the next compact;
- a length prefix above ``max_frame_size`` raises :class:`FrameTooLargeError` *before* any of
  that frame's body is buffered beyond what the caller already fed, so a peer announcing
  2 GiB costs us nothing;
- the work per call is linear in the bytes fed (one copy in, one copy out per body).
"""

from __future__ import annotations

import struct

from minipulsar.errors import FrameTooLargeError

LENGTH = struct.Struct(">I")
LENGTH_SIZE = LENGTH.size

DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 64 * 1024
"""5 MiB of message (Pulsar's ``maxMessageSize``) plus room for the command around it."""


class FrameDecoder:
    """Turns a byte stream into frame bodies.

    Feed bytes with :meth:`feed`, take complete bodies with :meth:`next_frame` until it
    returns ``None``, then call :meth:`compact` once.
    """

    __slots__ = ("_buffer", "_start", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buffer = bytearray()
        self._start = 0
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or ``None`` when more bytes are needed.

        Raises:
            FrameTooLargeError: the next frame announces more than ``max_frame_size`` bytes.
        """
        buffer, start = self._buffer, self._start
        available = len(buffer) - start
        if available < LENGTH_SIZE:
            return None
        (length,) = LENGTH.unpack_from(buffer, start)
        if length > self.max_frame_size:
            raise FrameTooLargeError(
                f"frame of {length} bytes exceeds the max frame size of {self.max_frame_size}"
            )
        end = start + LENGTH_SIZE + length
        if len(buffer) < end:
            return None
        self._start = end
        return bytes(buffer[start + LENGTH_SIZE : end])

    def compact(self) -> None:
        """Drop consumed bytes; once per read, not per frame, so parsing stays linear."""
        if self._start:
            del self._buffer[: self._start]
            self._start = 0

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._start


def frame_header(body_length: int) -> bytes:
    """The length prefix for a body; sent beside the body (writelines), never concatenated."""
    return LENGTH.pack(body_length)
