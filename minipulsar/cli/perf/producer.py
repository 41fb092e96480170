"""``perf produce``: publish at a fixed rate and measure publish latency (send → receipt).

As pulsar-perf's ``PerformanceProducer``: ``num_producers`` producers on each topic, one
sender going round-robin over them at ``rate_per_s`` in total (one :class:`RateLimiter`);
the payload is ``size_bytes`` random capital letters (seeded, so runs are comparable); a
message's latency runs from ``send_async`` to its receipt, in µs, and is not recorded during
the warm-up. At a fixed rate a second figure runs from the message's *intended* send time (its
permit's due time) instead: corrected for coordinated omission, it charges a stall to every
message the sender should have sent during it, not only to the one it was waiting on.
Producers block when ``max_outstanding`` messages are pending
(``block_if_queue_full``), which throttles the sender — so ``-r`` is a ceiling, and the rate
reached says what the cluster sustains. The sender sends the permits that are due in
bursts and sleeps at least :data:`PACING_SLEEP_S` between them; while the run measures, the
cyclic GC runs less often (:func:`run_gc_settings`): the perf process's CPU per message is
one of the figures it is used for.

The sender stops at the first of ``num_messages`` sent, ``duration_s``, or the caller's stop
event; what is in flight then is waited for (up to :data:`DRAIN_TIMEOUT_S`) and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from minipulsar import AlreadyClosed, Client, CompressionType, MessageId
from minipulsar.cli.perf.options import ProduceOptions
from minipulsar.cli.perf.payload import make_payload
from minipulsar.cli.perf.publish import publish_callback, publish_session
from minipulsar.cli.perf.rate_limiter import RateLimiter
from minipulsar.cli.perf.report import PerfResult
from minipulsar.cli.perf.session import (
    DRAIN_TIMEOUT_S,
    YIELD_EVERY,
    Emit,
    PerfSession,
    print_line,
    run_gc_settings,
)
from minipulsar.cli.perf.topics import expand_topics
from minipulsar.errors import MiniPulsarError

log = logging.getLogger(__name__)


PACING_SLEEP_S = 0.001
"""The shortest sleep of a paced sender: the event loop's timer resolution. uvloop rounds a
timer to whole milliseconds, so a shorter sleep (at 10k msg/s the next permit is 100 µs
away) returns at the next loop iteration and the sender spins, a core's worth of CPU; after
this sleep it sends every permit that became due (a few milliseconds' worth at most), and a
message's latency still runs from its own send."""


class PerfProducer(Protocol):
    """What the sender needs of a producer (a topic's ``Producer`` or a ``PartitionedProducer``)."""

    def send_async(
        self, content: bytes | None, callback: Callable[[Any, MessageId | None], None]
    ) -> asyncio.Future[None] | None:
        """A future done once the producer took the message; a ``PartitionedProducer`` returns
        None, and the sender goes on without waiting for room."""
        ...

    async def flush(self) -> None: ...


def producer_settings(options: ProduceOptions) -> dict[str, Any]:
    """``create_producer`` keyword arguments for ``options``."""
    settings: dict[str, Any] = {
        "max_pending_messages": options.max_outstanding,
        "block_if_queue_full": True,
        "send_timeout_millis": int(options.send_timeout_s * 1000),
        "compression_type": CompressionType(options.compression),
        "batching_enabled": options.batching_enabled,
    }
    if options.batching_enabled:
        settings.update(
            batching_max_publish_delay_ms=max(0.0, options.batch_time_window_ms),
            batching_max_messages=options.batch_max_messages if options.batch_max_messages > 0 else 1000,
            batching_max_allowed_size_in_bytes=options.batch_max_bytes
            if options.batch_max_bytes > 0
            else 4 * 1024 * 1024,
        )
    return settings


async def run_produce(
    options: ProduceOptions, *, stop: asyncio.Event | None = None, emit: Emit | None = print_line
) -> PerfResult:
    """Run ``perf produce``; ``emit`` gets each periodic line and the two aggregate lines
    (None: silent); setting ``stop`` ends the run early (``result.interrupted``).

    Raises:
        ValueError: bad topic names or service URL.
        MiniPulsarError: the producers could not be created (e.g. ConnectionClosedError:
            the cluster is unreachable within ``operation_timeout_s``).
        PerfInterrupted: ``stop`` was set before the run began.
    """
    topics = expand_topics(options.topics, options.num_topics)
    payload = make_payload(options.size_bytes)
    session = publish_session(
        interval_s=options.stats_interval_s,
        duration_s=options.duration_s,
        warmup_s=options.warmup_s,
        emit=emit,
        stop=stop,
        timeline_s=options.timeline_s,
    )
    async with _producers(options, topics, session) as producers:
        with run_gc_settings():
            session.begin()
            session.start_worker(_send(producers, payload, session, options))
            try:
                await session.wait()
            finally:
                await session.stop_workers()
            await _drain(producers)
            session.end()
    return session.result(targets=topics, options=asdict(options))


@contextlib.asynccontextmanager
async def _producers(
    options: ProduceOptions, topics: list[str], session: PerfSession
) -> AsyncIterator[Sequence[PerfProducer]]:
    """The run's producers on the client ``options.client`` names, closed on exit."""
    if options.client == "official":
        from minipulsar.cli.perf.official import official_producers  # the optional client, only when asked for

        async with official_producers(options, topics) as official:
            yield official
        return
    async with Client(options.service_url, operation_timeout_seconds=options.operation_timeout_s) as client:
        settings = producer_settings(options)
        producers = await session.set_up(
            asyncio.gather(
                *(client.create_producer(topic, **settings) for topic in topics for _ in range(options.num_producers))
            )
        )
        yield producers


async def _send(
    producers: Sequence[PerfProducer], payload: bytes, session: PerfSession, options: ProduceOptions
) -> None:
    """Send in bursts of what the rate limiter says is due (at most YIELD_EVERY, then yield):
    one clock read and one loop check per burst, one ``send_async`` per message.

    Paced, each message also carries its intended send time: the burst's first due time plus
    one interval per message before it. Debt older than the limiter's burst (one second) is
    forgotten, which bounds what one stall adds to that coordinated-omission-corrected figure."""
    limiter = RateLimiter(options.rate_per_s) if options.rate_per_s > 0 else None
    on_complete = publish_callback(session, len(payload), _failure_counter(session), paced=limiter is not None)
    sends = [producer.send_async for producer in producers]
    count, limit, done = len(producers), options.num_messages, session.done
    monotonic_ns, partial = time.monotonic_ns, functools.partial
    step_ns = int(limiter.interval_s * 1e9) if limiter is not None else 0
    intended_ns: int | None = None
    sent = 0
    while not done.is_set():
        if limit and sent >= limit:
            session.finish()
            return
        burst = YIELD_EVERY
        if limiter is not None:
            burst, wait_s = limiter.take_due(YIELD_EVERY)
            if not burst:
                await session.sleep(max(wait_s, PACING_SLEEP_S))
                continue
            intended_ns = int(limiter.last_due_s * 1e9)
        if limit:
            burst = min(burst, limit - sent)
        waited = False
        for _ in range(burst):
            taken = sends[sent % count](payload, partial(on_complete, monotonic_ns(), intended_ns))
            sent += 1
            if intended_ns is not None:
                intended_ns += step_ns
            if taken is not None and not taken.done():  # the producer is full: wait until it takes the message
                await taken
                waited = True
                if done.is_set():
                    return
        if not waited:
            await asyncio.sleep(0)


def _failure_counter(session: PerfSession) -> Callable[[Any], None]:
    """``failed(error)``: count a failed message, log the first (closing cut-offs are not failures)."""
    record_failure = session.stats.record_failure
    first_failure = [True]

    def failed(error: Any) -> None:
        if not isinstance(error, AlreadyClosed):  # pulsar-perf ignores sends cut off by closing
            record_failure()
            if first_failure[0]:
                first_failure[0] = False
                log.warning("a message failed: %s: %s (further failures are only counted)", type(error).__name__, error)

    return failed


async def _drain(producers: Sequence[PerfProducer]) -> None:
    """Wait for the receipts of what is in flight (bounded: the figures should not wait forever)."""
    try:
        await asyncio.wait_for(asyncio.gather(*(p.flush() for p in producers)), DRAIN_TIMEOUT_S)
    except TimeoutError:
        log.warning("messages still unacknowledged %.0f s after the end of the run; not counted", DRAIN_TIMEOUT_S)
    except MiniPulsarError as error:
        log.warning("flushing the producers failed: %s", error)
