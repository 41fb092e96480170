"""Framing: a byte stream in, frame bodies out. Sans-IO: no sockets, no asyncio.

A frame is a ``uint32`` big-endian length followed by that many bytes of body (one msgpack
map, decoded one layer up in :mod:`minipulsar.protocol.codec`).

Bytes come in either way: :meth:`FrameDecoder.feed` copies a chunk in (h11 style), or
:meth:`FrameDecoder.get_buffer` / :meth:`FrameDecoder.buffer_updated` let the transport read
straight into the decoder's buffer (``asyncio.BufferedProtocol``: no ``bytes`` object per
read, no copy into the buffer; docs/design.md §6 — ~100 KiB reads through malloc ran randomly 5x
slower here).

Invariants of :class:`FrameDecoder`:
- ``_buffer[_start:_end]`` holds the bytes received and not yet returned as frames; bytes
  before ``_start`` are consumed;
- the buffer never changes size in place (it is replaced when it must grow, and compacted
  with same-size slice moves), so memoryviews of it never block a read;
- a length prefix above ``max_frame_size`` raises :class:`FrameTooLargeError` *before* any of
  that frame's body is buffered beyond what the caller already fed, and the buffer is never
  grown for such a frame, so a peer announcing 2 GiB costs us nothing;
- the work per call is linear in the bytes fed: each body is copied out at most once (none
  for :meth:`next_span`), and a compaction moves at most the one partial frame at the tail,
  once per buffer's worth of reads.
"""

from __future__ import annotations

import struct

from minipulsar.errors import FrameTooLargeError

LENGTH = struct.Struct(">I")
LENGTH_SIZE = LENGTH.size

DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024 + 64 * 1024
"""5 MiB of message (Pulsar's ``maxMessageSize``) plus room for the command around it."""

INITIAL_CAPACITY = 64 * 1024
"""A new connection's receive buffer: ~60 pipelined 1 KiB frames per read."""
READ_BYTES_MIN = 16 * 1024
"""Room guaranteed to a read: below it the tail is compacted or the buffer grown."""
PIPELINE_CAPACITY = 256 * 1024
"""The buffer grows to at least this once frames arrive faster than one buffer per read
(a connection carrying big frames asks for more: :class:`FrameDecoder`'s ``pipeline_capacity``)."""
SHRINK_ABOVE = 1024 * 1024
"""An empty buffer larger than this (after a big frame) is given back."""

_unpack_length = LENGTH.unpack_from


class FrameDecoder:
    """Turns a byte stream into frame bodies.

    Put bytes in with :meth:`feed` (or :meth:`get_buffer` + :meth:`buffer_updated`), take
    complete bodies with :meth:`next_frame` (a ``bytes`` copy) or :meth:`next_span` (offsets
    into :attr:`view`, no copy) until they return ``None``, then call :meth:`compact` once.
    """

    __slots__ = ("_buffer", "_end", "_pipeline_capacity", "_shrink_above", "_start", "_view", "max_frame_size")

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, pipeline_capacity: int = PIPELINE_CAPACITY
    ) -> None:
        """``pipeline_capacity``: what the buffer grows to once frames pile up. A bookie's adds
        of 64 KiB ran ~10 % faster with 1 MiB than with 256 KiB: a quarter of the reads, and of
        the partial frames moved to the front after each one."""
        self._buffer = bytearray(INITIAL_CAPACITY)
        self._view = memoryview(self._buffer)
        self._start = 0
        self._end = 0
        self.max_frame_size = max_frame_size
        self._pipeline_capacity = pipeline_capacity
        self._shrink_above = max(SHRINK_ABOVE, pipeline_capacity)

    # -- bytes in -------------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if isinstance(data, memoryview) and (data.itemsize != 1 or data.ndim != 1):
            data = data.cast("B")
        size = len(data)
        if not size:
            return
        self._reserve(size)
        end = self._end
        self._buffer[end : end + size] = data
        self._end = end + size

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Free space to read into (at least ``READ_BYTES_MIN``, and room for the rest of the
        frame in progress when its length is known and allowed); then :meth:`buffer_updated`."""
        wanted = max(sizehint, READ_BYTES_MIN)
        pending = self._end - self._start
        if pending >= LENGTH_SIZE:
            (length,) = _unpack_length(self._buffer, self._start)
            if length <= self.max_frame_size:  # never grow for a frame that will be refused
                wanted = max(wanted, LENGTH_SIZE + length - pending)
        self._reserve(wanted)
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last :meth:`get_buffer` view."""
        assert 0 <= nbytes <= len(self._buffer) - self._end, nbytes
        self._end += nbytes

    def _reserve(self, size: int) -> None:
        """Make ``size`` bytes free after ``_end``: compact the tail to the front, or grow."""
        buffer, start, end = self._buffer, self._start, self._end
        if len(buffer) - end >= size:
            return
        pending = end - start
        if pending + size <= len(buffer) and start >= pending:
            # Same-size move (never a resize): legal while memoryviews of the buffer exist.
            buffer[0:pending] = self._view[start:end]
        else:
            capacity = max(pending + size, 2 * len(buffer), self._pipeline_capacity)
            grown = bytearray(capacity)
            grown[0:pending] = self._view[start:end]
            self._buffer, self._view = grown, memoryview(grown)
        self._start, self._end = 0, pending

    # -- frames out -----------------------------------------------------------------------------

    def next_span(self) -> tuple[int, int] | None:
        """``(start, end)`` of the next complete body in :attr:`view`, or ``None`` when more
        bytes are needed. Valid until the next feed, read or :meth:`compact`.

        Raises:
            FrameTooLargeError: the next frame announces more than ``max_frame_size`` bytes.
        """
        start = self._start
        if self._end - start < LENGTH_SIZE:
            return None
        (length,) = _unpack_length(self._buffer, start)
        if length > self.max_frame_size:
            raise FrameTooLargeError(f"frame of {length} bytes exceeds the max frame size of {self.max_frame_size}")
        end = start + LENGTH_SIZE + length
        if self._end < end:
            return None
        self._start = end
        return start + LENGTH_SIZE, end

    def next_frame(self) -> bytes | None:
        """The next complete frame body (a copy), or ``None`` when more bytes are needed.

        Raises:
            FrameTooLargeError: the next frame announces more than ``max_frame_size`` bytes.
        """
        span = self.next_span()
        if span is None:
            return None
        return bytes(self._view[span[0] : span[1]])

    @property
    def view(self) -> memoryview:
        """The whole receive buffer; slice it with :meth:`next_span`'s offsets."""
        return self._view

    def compact(self) -> None:
        """Once per read, not per frame: forget consumed bytes (free when all were consumed)."""
        if self._start == self._end:
            self._start = self._end = 0
            if len(self._buffer) > self._shrink_above:
                self._buffer = bytearray(INITIAL_CAPACITY)
                self._view = memoryview(self._buffer)
        elif len(self._buffer) - self._end < READ_BYTES_MIN:
            self._reserve(READ_BYTES_MIN)

    def discard(self) -> None:
        """Drop every byte buffered, consumed or not."""
        self._start = self._end = 0
        self.compact()

    @property
    def buffered_bytes(self) -> int:
        return self._end - self._start
