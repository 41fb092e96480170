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
``bookkeeper`` factory, and by default uses :func:`minipulsar.cli.perf.bookkeeper_client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from minipulsar.cli.perf.options import ManagedLedgerOptions
from minipulsar.cli.perf.payload import make_payload
from minipulsar.cli.perf.rate_limiter import RateLimiter
from minipulsar.cli.perf.report import MANAGED_LEDGER, PerfResult
from minipulsar.cli.perf.session import DRAIN_TIMEOUT_S, YIELD_EVERY, Emit, PerfSession, print_line
from minipulsar.cli.perf.stats import MAX_LATENCY_US, PerfStats

log = logging.getLogger(__name__)

LEDGER_METADATA = {"application": "minipulsar-perf", "component": "managed-ledger"}

BookKeeperFactory = Callable[[str], contextlib.AbstractAsyncContextManager[Any]]
"""``factory(metadata_url)``: an async context manager yielding an object with
``create_ledger(ensemble_size, write_quorum, ack_quorum, custom)`` → a handle with
``add(payload) -> Future`` and ``close()`` (the broker's ``BookKeeper``)."""


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
        from minipulsar.cli.perf.command import bookkeeper_client

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
        in_flight: set[asyncio.Future] = set()
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
            with contextlib.suppress(Exception):  # the figures are in; a failed close changes nothing
                await ledger.close()
    return session.result(targets=[str(ledger.ledger_id) for ledger in ledgers], options=asdict(options))


async def _write(
    ledgers: list, payload: bytes, session: PerfSession, options: ManagedLedgerOptions, in_flight: set[asyncio.Future]
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
        future.add_done_callback(lambda f, t=added_ns: on_added(t, f))
        sent += 1


def _completion(
    session: PerfSession, size_bytes: int, window: asyncio.Semaphore | None, in_flight: set[asyncio.Future]
):
    stats = session.stats
    warmup_end_ns = int(session.warmup_end_s * 1e9)

    def on_added(added_ns: int, future: asyncio.Future) -> None:
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
