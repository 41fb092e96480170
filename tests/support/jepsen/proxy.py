"""A fault-injecting TCP proxy: forwards one listening address to one target until cut.

- Up: every accepted connection is relayed both ways to the target.
- :meth:`FaultProxy.cut`: every relayed connection is aborted (both ends see a reset) and
  new connections are accepted but never answered — a black hole, as a partition looks to
  TCP — until :meth:`FaultProxy.heal`, which closes them.
- The proxy lives on the harness's event loop; :meth:`FaultProxy.close` ends it and every
  connection it holds.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["FaultProxy", "abort_writer"]

CHUNK_BYTES = 256 * 1024


class FaultProxy:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.listen, self.target = listen, target
        self.is_cut = False
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()
        self._held: set[asyncio.StreamWriter] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accepted, *self.listen, reuse_address=True)
        if self.listen[1] == 0:
            self.listen = (self.listen[0], self._server.sockets[0].getsockname()[1])
        return self

    def cut(self) -> None:
        self.is_cut = True
        for writer in list(self._writers):
            abort_writer(writer)

    def heal(self) -> None:
        self.is_cut = False
        for writer in list(self._held):
            abort_writer(writer)
        self._held.clear()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        self.heal()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            self._held.add(writer)
            return
        try:
            target_reader, target_writer = await asyncio.open_connection(*self.target)
        except OSError:
            abort_writer(writer)
            return
        if self.is_cut:  # cut while connecting
            abort_writer(writer)
            abort_writer(target_writer)
            return
        self._writers.update((writer, target_writer))
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            await asyncio.gather(_pipe(reader, target_writer), _pipe(target_reader, writer))
        finally:
            self._relays.discard(task)
            self._writers.difference_update((writer, target_writer))
            abort_writer(writer)
            abort_writer(target_writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream or an error; then the other direction ends too."""
    try:
        while chunk := await reader.read(CHUNK_BYTES):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        abort_writer(writer)


def abort_writer(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if not transport.is_closing():
        transport.abort()
