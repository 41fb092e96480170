"""Latency on a TCP path: :class:`DelayProxy`, and a cluster whose metadata calls go through one.

- :class:`DelayProxy` forwards one listening address to a target and holds every chunk for a
  one-way delay per direction (``to_target_s``, ``to_client_s``), settable at any time: a
  chunk read at *t* leaves at *t* + the delay then in force, and never before the chunk read
  ahead of it, so bytes stay in order. A delay adds latency, not a bandwidth limit: chunks
  in flight overlap. At most :data:`CHUNKS_IN_FLIGHT_MAX` chunks wait per direction (the
  reader then waits: back-pressure, as a full TCP window).
- :func:`delayed_metadata_cluster`: a :class:`ProcessCluster` whose bookies and brokers reach
  the metastore through one :class:`DelayProxy` (``cluster.metadata_proxy``); the test
  process's own store clients may use ``cluster.metadata_url`` (direct). Every process and
  the proxy are stopped when the context exits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster import ProcessCluster, cluster_running
from tests.support.jepsen.proxy import abort_writer

__all__ = ["DelayProxy", "MetadataDelayCluster", "delayed_metadata_cluster"]

CHUNK_BYTES = 64 * 1024
CHUNKS_IN_FLIGHT_MAX = 1024

Address = tuple[str, int]


class DelayProxy:
    """A TCP proxy that delays each direction by its own, changeable, one-way delay."""

    def __init__(self, listen: Address, target: Callable[[], Address]) -> None:
        """``target`` is asked at each accepted connection (the server may start later)."""
        self.listen, self._target = listen, target
        self.to_target_s = 0.0
        """One-way delay of bytes from the client to the target."""
        self.to_client_s = 0.0
        """One-way delay of bytes from the target back to the client."""
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[None]] = set()

    def set_delay(self, one_way_s: float) -> None:
        """The same one-way delay both ways (a round trip costs twice it)."""
        self.to_target_s = self.to_client_s = one_way_s

    @property
    def address(self) -> str:
        return f"{self.listen[0]}:{self.listen[1]}"

    async def start(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._accepted, *self.listen)
        self.listen = (self.listen[0], self._server.sockets[0].getsockname()[1])
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            target_reader, target_writer = await asyncio.open_connection(*self._target())
        except OSError:
            abort_writer(writer)
            return
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            await asyncio.gather(
                _delayed_pipe(reader, target_writer, lambda: self.to_target_s),
                _delayed_pipe(target_reader, writer, lambda: self.to_client_s),
            )
        finally:
            self._relays.discard(task)
            abort_writer(writer)
            abort_writer(target_writer)


async def _delayed_pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: Callable[[], float]
) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay_s()`` (read when it arrives) late."""
    loop = asyncio.get_running_loop()
    in_flight: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(CHUNKS_IN_FLIGHT_MAX)

    async def read() -> None:
        try:
            while chunk := await reader.read(CHUNK_BYTES):
                await in_flight.put((loop.time() + delay_s(), chunk))
        except (ConnectionError, OSError):
            pass
        await in_flight.put(None)

    reading = asyncio.ensure_future(read())
    try:
        while (item := await in_flight.get()) is not None:
            due, chunk = item
            if (wait_s := due - loop.time()) > 0:
                await asyncio.sleep(wait_s)  # the latency being simulated, not a synchronisation
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        abort_writer(writer)
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)


@dataclass
class MetadataDelayCluster(ProcessCluster):
    """Bookies and brokers reach the metastore through :attr:`metadata_proxy`."""

    metadata_proxy: DelayProxy | None = None

    def metadata_url_of(self, name: str) -> str:
        assert self.metadata_proxy is not None, "the proxy starts with the cluster"
        return f"metastore://{self.metadata_proxy.address}"

    def _metastore_address(self) -> Address:
        assert self.metastore is not None and self.metastore.port, "the metastore starts first"
        return (self.metastore.host, self.metastore.port)

    async def start(self) -> None:
        self.metadata_proxy = await DelayProxy(("127.0.0.1", 0), self._metastore_address).start()
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self.metadata_proxy is not None:
            await self.metadata_proxy.close()


@contextlib.asynccontextmanager
async def delayed_metadata_cluster(
    root: Path,
    *,
    bookies: int = 2,
    brokers: int = 1,
    broker_settings: Mapping[str, object] | None = None,
    bookie_settings: Mapping[str, object] | None = None,
) -> AsyncIterator[MetadataDelayCluster]:
    """A started :class:`MetadataDelayCluster` (no delay yet), stopped when the context exits."""
    cluster = MetadataDelayCluster(
        root,
        bookies,
        dict(broker_settings or {}),
        broker_count=brokers,
        bookie_settings=dict(bookie_settings or {}),
    )
    async with cluster_running(cluster):
        yield cluster
