"""``perf managed-ledger``: write entries straight to the bookies, with no broker in the way.

As pulsar-perf's ``ManagedLedgerWriter``: ``num_ledgers`` ledgers with the given quorums
(E/Qw/Qa), one writer going round-robin over them at ``rate_per_s`` entries per second in
total with at most ``max_outstanding`` adds in flight; an entry's latency runs from
``LedgerHandle.add`` to its completion on Qa bookies (in µs). The difference with
``perf produce`` at the same rate and size is what the broker hop costs.

The ledgers are plain BookKeeper ledgers (custom metadata ``application=minipulsar-perf``),
created through the broker's BookKeeper client, and closed at the end; nothing deletes them.
A failed add ends the run (pulsar-perf exits), its error in ``result.error``.

The BookKeeper client lives in ``broker/``, which the core package may only reach from
``minipulsar.cli`` (``tests/unit/test_layering.py``): :func:`run_managed_ledger` takes a
``bookkeeper`` factory, and by default uses :func:`bookkeeper_client` (the broker's BookKeeper client).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Protocol

from minipulsar.cli.perf.options import ManagedLedgerOptions
from minipulsar.cli.perf.payload import make_payload
from minipulsar.cli.perf.rate_limiter import RateLimiter
from minipulsar.cli.perf.report import MANAGED_LEDGER, PerfResult
from minipulsar.cli.perf.session import DRAIN_TIMEOUT_S, YIELD_EVERY, Emit, PerfSession, print_line
from minipulsar.cli.perf.stats import MAX_LATENCY_US, PerfStats
from minipulsar.errors import MiniPulsarError

log = logging.getLogger(__name__)

LEDGER_METADATA = {"application": "minipulsar-perf", "component": "managed-ledger"}


class Ledger(Protocol):
    """What the writer needs of a ledger handle (the broker's ``LedgerHandle``)."""

    @property
    def ledger_id(self) -> int: ...

    def add(self, payload: bytes) -> asyncio.Future[int]:
        """The future yields the entry id once the entry is on Qa bookies."""
        ...

    async def close(self) -> None: ...


class BookKeeperClient(Protocol):
    """What the run needs of a BookKeeper client (the broker's ``BookKeeper``)."""

    async def create_ledger(
        self, ensemble_size: int, write_quorum: int, ack_quorum: int, custom: dict[str, str] | None = None
    ) -> Ledger: ...


BookKeeperFactory = Callable[[str], contextlib.AbstractAsyncContextManager[BookKeeperClient]]
"""``factory(metadata_url)``: an async context manager yielding a started BookKeeper client."""


async def run_managed_ledger(
    options: ManagedLedgerOptions,
    *,
    stop: asyncio.Event | None = None,
    emit: Emit | None = print_line,
    bookkeeper: BookKeeperFactory | None = None,
) -> PerfResult:
    """Run ``perf managed-ledger``; ``emit`` and ``stop`` as :func:`minipulsar.cli.perf.run_produce`.

    Raises:
        ValueError: a malformed metadata store URL.
        MiniPulsarError: the metadata store is unreachable (ConnectionClosedError), or too
            few bookies for the ensemble (NotEnoughBookiesError).
        PerfInterrupted: ``stop`` was set before the run began.
    """
    if bookkeeper is None:
        bookkeeper = bookkeeper_client
    payload = make_payload(options.size_bytes)
    stats = PerfStats(latency_unit_ms=0.001, latency_highest=MAX_LATENCY_US)
    session = PerfSession(
        MANAGED_LEDGER,
        stats,
        interval_s=options.stats_interval_s,
        duration_s=options.duration_s,
        warmup_s=options.warmup_s,
        emit=emit,
        stop=stop,
    )
    async with contextlib.AsyncExitStack() as stack:
        client = await session.set_up(stack.enter_async_context(bookkeeper(options.metadata_url)))
        ledgers = await session.set_up(
            asyncio.gather(
                *(
                    client.create_ledger(
                        options.ensemble_size, options.write_quorum, options.ack_quorum, dict(LEDGER_METADATA)
                    )
                    for _ in range(options.num_ledgers)
                )
            )
        )
        in_flight: set[asyncio.Future[int]] = set()
        session.begin()
        session.start_worker(_write(list(ledgers), payload, session, options, in_flight))
        try:
            await session.wait()
        finally:
            await session.stop_workers()
        if in_flight:
            _, late = await asyncio.wait(in_flight, timeout=DRAIN_TIMEOUT_S)
            if late:
                log.warning(
                    "%d adds still in flight %.0f s after the end of the run; not counted", len(late), DRAIN_TIMEOUT_S
                )
        session.end()
        for ledger in ledgers:
            with contextlib.suppress(MiniPulsarError):  # the figures are in; a failed close changes nothing
                await ledger.close()
    return session.result(targets=[str(ledger.ledger_id) for ledger in ledgers], options=asdict(options))


async def _write(
    ledgers: list[Ledger],
    payload: bytes,
    session: PerfSession,
    options: ManagedLedgerOptions,
    in_flight: set[asyncio.Future[int]],
) -> None:
    limiter = RateLimiter(options.rate_per_s) if options.rate_per_s > 0 else None
    window = asyncio.Semaphore(options.max_outstanding) if options.max_outstanding > 0 else None
    on_added = _completion(session, len(payload), window, in_flight)
    count, limit, done = len(ledgers), options.num_messages, session.done
    sent = 0
    while not done.is_set():
        if limit and sent >= limit:
            session.finish()
            return
        if window is not None:
            await window.acquire()
        if limiter is not None and (wait_s := limiter.reserve()) > 0:
            await session.sleep(wait_s)
        elif sent % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if done.is_set():
            if window is not None:
                window.release()
            return
        added_ns = time.monotonic_ns()
        future = ledgers[sent % count].add(payload)
        in_flight.add(future)
        future.add_done_callback(functools.partial(on_added, added_ns))
        sent += 1


def _completion(
    session: PerfSession, size_bytes: int, window: asyncio.Semaphore | None, in_flight: set[asyncio.Future[int]]
) -> Callable[[int, asyncio.Future[int]], None]:
    stats = session.stats
    warmup_end_ns = int(session.warmup_end_s * 1e9)

    def on_added(added_ns: int, future: asyncio.Future[int]) -> None:
        in_flight.discard(future)
        if window is not None:
            window.release()
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            now_ns = time.monotonic_ns()
            stats.record(size_bytes, (now_ns - added_ns) // 1000 if now_ns >= warmup_end_ns else None)
            return
        stats.record_failure()
        if session.error is None:
            log.warning("write error on ledger entry: %s: %s", type(error).__name__, error)
        session.finish(error)

    return on_added


@contextlib.asynccontextmanager
async def bookkeeper_client(metadata_url: str) -> AsyncIterator[BookKeeperClient]:
    """The broker's BookKeeper client on the metadata store at ``metadata_url``, for
    ``perf managed-ledger`` (the application layer may import the broker)."""
    from minipulsar.bookkeeper import BookKeeper, BookKeeperSettings
    from minipulsar.metadata import open_metadata_store

    store = await open_metadata_store(metadata_url)
    bookkeeper = BookKeeper(store, BookKeeperSettings())
    try:
        await bookkeeper.start()
        yield bookkeeper
    finally:
        await bookkeeper.close()
        await store.close()
