"""``perf consume``: receive, acknowledge, and measure end-to-end latency (publish → receive).

As pulsar-perf's ``PerformanceConsumer``: on every topic, every subscription gets
``num_consumers`` consumers, each with its own receive loop. A message's latency is
``now − publish_time`` in whole milliseconds (the producer stamps its batch when sealing it,
so this includes batching; the clocks of producer and consumer must agree — one machine here).
Negative values (clock skew) are not recorded. Acknowledgements are Pulsar's
fire-and-forget ones, grouped every ``acks_delay_ms`` (``ack_receipt_enabled=False``), so
the loop never waits for the broker; ``rate_per_s`` simulates a slow consumer.

The run ends at the first of ``num_messages`` received, ``duration_s``, or the stop event.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from typing import Any, Protocol

from minipulsar import Client, ConsumerType, InitialPosition, Message
from minipulsar.cli.perf.options import ConsumeOptions
from minipulsar.cli.perf.rate_limiter import RateLimiter
from minipulsar.cli.perf.report import CONSUME, PerfResult
from minipulsar.cli.perf.session import YIELD_EVERY, Emit, PerfSession, print_line
from minipulsar.cli.perf.stats import MAX_LATENCY_MS, PerfStats
from minipulsar.cli.perf.topics import expand_subscriptions, expand_topics
from minipulsar.errors import MiniPulsarError


class PerfConsumer(Protocol):
    """What a receive loop needs of a consumer (a topic's ``Consumer`` or a ``MultiTopicsConsumer``)."""

    async def receive(self) -> Message: ...

    async def acknowledge(self, message: Message) -> None: ...


def consumer_settings(options: ConsumeOptions) -> dict[str, Any]:
    """``subscribe`` keyword arguments for ``options``."""
    return {
        "consumer_type": ConsumerType(options.subscription_type),
        "initial_position": InitialPosition(options.subscription_position),
        "receiver_queue_size": options.receiver_queue_size,
        "acknowledgment_group_time_ms": options.acks_delay_ms,
        "ack_receipt_enabled": False,
    }


async def run_consume(
    options: ConsumeOptions, *, stop: asyncio.Event | None = None, emit: Emit | None = print_line
) -> PerfResult:
    """Run ``perf consume``; ``emit`` and ``stop`` as :func:`minipulsar.cli.perf.run_produce`.

    Raises:
        ValueError: bad topic or subscription names, or service URL.
        MiniPulsarError: the consumers could not subscribe (e.g. ConnectionClosedError: the
            cluster is unreachable within ``operation_timeout_s``; ConsumerBusy: another
            consumer holds an Exclusive subscription).
        PerfInterrupted: ``stop`` was set before the run began.
    """
    topics = expand_topics(options.topics, options.num_topics)
    subscriptions = expand_subscriptions(options.subscriptions, options.num_subscriptions)
    stats = PerfStats(latency_unit_ms=1.0, latency_highest=MAX_LATENCY_MS)
    session = PerfSession(
        CONSUME, stats, interval_s=options.stats_interval_s, duration_s=options.duration_s, emit=emit, stop=stop
    )
    limiter = RateLimiter(options.rate_per_s) if options.rate_per_s > 0 else None
    async with Client(options.service_url, operation_timeout_seconds=options.operation_timeout_s) as client:
        settings = consumer_settings(options)
        consumers = await session.set_up(
            asyncio.gather(
                *(
                    client.subscribe(topic, subscription, **settings)
                    for topic in topics
                    for subscription in subscriptions
                    for _ in range(options.num_consumers)
                )
            )
        )
        session.begin()
        for consumer in consumers:
            session.start_worker(_receive(consumer, session, limiter, options.num_messages))
        try:
            await session.wait()
        finally:
            await session.stop_workers()
        session.end()
    return session.result(targets=topics, options=asdict(options))


async def _receive(consumer: PerfConsumer, session: PerfSession, limiter: RateLimiter | None, limit: int) -> None:
    stats, done = session.stats, session.done
    received = 0
    while not done.is_set():
        message = await consumer.receive()
        if limit and stats.messages >= limit:  # another consumer got the last one
            session.finish()
            return
        latency_ms = int(time.time() * 1000) - message.publish_timestamp()
        stats.record(len(message.data()), latency_ms if latency_ms >= 0 else None)
        if limit and stats.messages >= limit:
            session.finish()
        if limiter is not None and (wait_s := limiter.reserve()) > 0:
            await session.sleep(wait_s)
        try:
            await consumer.acknowledge(message)
            stats.record_ack(True)
        except MiniPulsarError:
            stats.record_ack(False)
        received += 1
        if received % YIELD_EVERY == 0:
            await asyncio.sleep(0)
