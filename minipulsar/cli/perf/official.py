"""``perf produce --client official``: the same workload driven through Pulsar's own Python
client (``pulsar-client``), which speaks Pulsar's binary protocol to the broker's port.

The official client is synchronous: its C++ core runs its own I/O threads and calls a
``send_async`` callback on one of them. :class:`OfficialProducer` makes such a producer look
like the sender's (:class:`~minipulsar.cli.perf.producer.PerfProducer`): each callback is
handed to the event loop (``call_soon_threadsafe``), where the run's statistics live, so the
recorded latency includes that hop (microseconds on an idle loop). A full producer blocks in
``send_async`` (``block_if_queue_full``), which blocks the loop's thread until a receipt frees
room, exactly as the pacing wants: the C++ threads keep receiving meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from minipulsar.cli.perf.options import ProduceOptions

INSTALL_HINT = "--client official needs Pulsar's Python client: pip install pulsar-client"


class OfficialClientMissing(RuntimeError):
    """``pulsar-client`` is not installed."""


class OfficialProducer:
    """A ``pulsar.Producer`` as the perf sender drives it."""

    def __init__(self, producer: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._producer = producer
        self._loop = loop

    def send_async(self, content: bytes | None, callback: Callable[[Any, Any], None]) -> None:
        import pulsar  # optional: only this mode needs it

        call_soon = self._loop.call_soon_threadsafe

        def sent(result: Any, message_id: Any) -> None:  # on a C++ client thread
            error = None if result == pulsar.Result.Ok else RuntimeError(f"send failed: {result}")
            call_soon(callback, error, message_id)

        self._producer.send_async(content, sent)

    async def flush(self) -> None:
        await asyncio.to_thread(self._producer.flush)


def official_producer_settings(options: ProduceOptions) -> dict[str, Any]:
    """``pulsar.Client.create_producer`` keyword arguments matching ``options`` (as
    :func:`~minipulsar.cli.perf.producer.producer_settings` does for minipulsar's client)."""
    import pulsar

    compression = {
        "NONE": pulsar.CompressionType.NONE,
        "LZ4": pulsar.CompressionType.LZ4,
        "ZLIB": pulsar.CompressionType.ZLib,
        "ZSTD": pulsar.CompressionType.ZSTD,
    }[options.compression]
    settings: dict[str, Any] = {
        "max_pending_messages": options.max_outstanding,
        "block_if_queue_full": True,
        "send_timeout_millis": int(options.send_timeout_s * 1000),
        "compression_type": compression,
        "batching_enabled": options.batching_enabled,
    }
    if options.batching_enabled:
        settings.update(
            batching_max_publish_delay_ms=max(1, round(options.batch_time_window_ms)),
            batching_max_messages=options.batch_max_messages if options.batch_max_messages > 0 else 1000,
            batching_max_allowed_size_in_bytes=options.batch_max_bytes
            if options.batch_max_bytes > 0
            else 4 * 1024 * 1024,
        )
    return settings


@contextlib.asynccontextmanager
async def official_producers(options: ProduceOptions, topics: list[str]) -> AsyncIterator[list[OfficialProducer]]:
    """``options.num_producers`` official producers on each topic, closed (with their client)
    on exit.

    Raises:
        OfficialClientMissing: ``pulsar-client`` is not installed.
    """
    try:
        import pulsar
    except ImportError as error:
        raise OfficialClientMissing(INSTALL_HINT) from error
    loop = asyncio.get_running_loop()
    client = await asyncio.to_thread(
        pulsar.Client, options.service_url, operation_timeout_seconds=max(1, round(options.operation_timeout_s))
    )
    try:
        settings = official_producer_settings(options)
        producers = [
            await asyncio.to_thread(client.create_producer, topic, **settings)
            for topic in topics
            for _ in range(options.num_producers)
        ]
        yield [OfficialProducer(producer, loop) for producer in producers]
    finally:
        await asyncio.to_thread(client.close)
