"""Write coalescing: every frame written in one loop iteration leaves in one ``writelines``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

FLUSH_BYTES = 256 * 1024
"""Flush at once past this many pending bytes, so one busy iteration cannot hoard memory."""


class CoalescingWriter:
    """Collects frames and flushes them with one syscall per loop iteration.

    Also tracks the transport's flow control: while the kernel buffer is full
    (``pause_writing``), :meth:`drain` waits and ``paused`` is true, so producers of
    outbound data (dispatchers) can stop instead of queueing without bound.
    """

    __slots__ = (
        "_buffers",
        "_loop",
        "_pending_bytes",
        "_resume_callbacks",
        "_resumed",
        "_scheduled",
        "_transport",
        "paused",
    )

    def __init__(self, transport: asyncio.WriteTransport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._buffers: list[bytes | memoryview] = []
        self._pending_bytes = 0
        self._scheduled = False
        self.paused = False
        self._resumed: asyncio.Future[None] | None = None
        self._resume_callbacks: list[Callable[[], None]] = []

    def write(self, header: bytes, body: bytes | memoryview) -> None:
        """Queue ``header`` then ``body``; ``body`` is kept (not copied) until the flush."""
        self._buffers.append(header)
        self._buffers.append(body)
        self._pending_bytes += len(header) + len(body)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def write_frame(self, frame: bytes) -> None:
        """One already complete frame (length prefix included)."""
        self._buffers.append(frame)
        self._pending_bytes += len(frame)
        if self._pending_bytes >= FLUSH_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not self._buffers or self._transport.is_closing():
            self._buffers.clear()
            self._pending_bytes = 0
            return
        buffers, self._buffers, self._pending_bytes = self._buffers, [], 0
        self._transport.writelines(buffers)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None
        callbacks, self._resume_callbacks = self._resume_callbacks, []
        for callback in callbacks:
            callback()

    def call_when_writable(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the transport accepts writes again (now if it does)."""
        if self.paused:
            self._resume_callbacks.append(callback)
        else:
            callback()

    async def drain(self) -> None:
        if not self.paused:
            return
        if self._resumed is None:
            self._resumed = self._loop.create_future()
        await asyncio.shield(self._resumed)

    def close(self) -> None:
        """Connection lost: release whoever waits for the writer, now and later."""
        self._buffers.clear()
        self._resume_callbacks.clear()
        # A paused writer stays paused forever once its transport is gone: without this, a
        # drain() after the connection dropped would never return.
        self.paused = False
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
