"""The workload: producers that record every send in a :class:`~.history.History`, and the
final read of every topic from its start.

- Each topic has ``producers_per_topic`` producers with fixed names (deduplication keys on
  them), no batching (one message per entry: a receipt names the entry), explicit sequence
  ids from 0, and at most ``window`` sends in flight each.
- A send's outcome: ``acked`` (with its position, or none for a recognised duplicate),
  ``failed`` when the client refused it before it left (its queue was full), ``unknown``
  otherwise (a timeout, a closed connection): the checker treats it as maybe stored.
- A producer whose creation fails (its topic is moving, its broker down) tries again until
  the workload stops.
- Every topic's check subscription exists before the first send (:meth:`Workload.subscribe`);
  :func:`read_back` reads each topic through it from the start, until every acknowledged
  send of it was seen and nothing more came for ``idle_s`` (or nothing at all for a minute);
  a position delivered twice is recorded once.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from minipulsar import Client, InitialPosition
from minipulsar.client.consumer import Consumer
from minipulsar.client.exceptions import ProducerQueueIsFull, Timeout
from minipulsar.client.message_id import MessageId
from minipulsar.client.producer import Producer
from minipulsar.errors import MiniPulsarError
from tests.support.jepsen.history import History, Outcome, Send, tagged_payload

__all__ = ["Workload", "read_back"]

RETRY_S = 0.5
STALL_S = 60.0
"""The read-back gives up on a topic after this long without a message."""
SUBSCRIPTION = "jepsen-check"


@dataclass
class Workload:
    service_url: str
    history: History
    seed: int
    topics: int = 2
    producers_per_topic: int = 2
    window: int = 8
    payload_bytes: int = 256
    send_timeout_ms: int = 30_000
    pace_s: float = 0.02
    """Pause between two sends of one producer (keeps the 2-core machine usable)."""

    def topic_names(self) -> list[str]:
        return [f"persistent://public/default/jepsen-{self.seed}-{t}" for t in range(self.topics)]

    async def subscribe(self) -> None:
        """Create every topic's check subscription (a topic without one keeps nothing: its
        ledgers are trimmed as they close)."""
        async with Client(self.service_url, operation_timeout_seconds=30) as client:
            for topic in self.topic_names():
                consumer = await client.subscribe(topic, SUBSCRIPTION, initial_position=InitialPosition.Earliest)
                await consumer.close()

    async def run(self, stop: asyncio.Event) -> None:
        async with Client(self.service_url, operation_timeout_seconds=10) as client:
            await asyncio.gather(
                *(
                    self._produce(client, topic, f"p{t}-{p}", stop)
                    for t, topic in enumerate(self.topic_names())
                    for p in range(self.producers_per_topic)
                )
            )

    async def _produce(self, client: Client, topic: str, name: str, stop: asyncio.Event) -> None:
        rng = random.Random(f"{self.seed}/{name}")
        producer = await self._create(client, topic, name, stop)
        if producer is None:
            return
        window = asyncio.Semaphore(self.window)
        sequence = 0
        while not stop.is_set():
            await window.acquire()
            payload = tagged_payload(name, sequence, rng.randbytes(self.payload_bytes))
            record = self.history.send(topic, name, sequence, payload, time.monotonic())
            producer.send_async(payload, _recorder(record, producer, window), sequence_id=sequence)
            sequence += 1
            await asyncio.sleep(self.pace_s)
        for _ in range(self.window):  # every send answered (or timed out)
            await window.acquire()
        with contextlib.suppress(MiniPulsarError):
            await producer.close()

    async def _create(self, client: Client, topic: str, name: str, stop: asyncio.Event) -> Producer | None:
        while not stop.is_set():
            try:
                producer = await client.create_producer(
                    topic,
                    producer_name=name,
                    batching_enabled=False,
                    send_timeout_millis=self.send_timeout_ms,
                    max_pending_messages=self.window * 2,
                )
                assert isinstance(producer, Producer), "a topic without partitions"
                return producer
            except MiniPulsarError:
                await asyncio.sleep(RETRY_S)
        return None


def _recorder(
    record: Send, producer: Producer, window: asyncio.Semaphore
) -> Callable[[BaseException | None, MessageId | None], None]:
    def done(error: BaseException | None, message_id: MessageId | None) -> None:
        record.done_s = time.monotonic()
        connection = getattr(producer, "_connection", None)
        record.broker = "{}:{}".format(*connection.address) if connection is not None else ""
        if error is None and message_id is not None:
            record.outcome = Outcome.ACKED
            if message_id.ledger_id() >= 0:
                record.position = (message_id.ledger_id(), message_id.entry_id())
        elif isinstance(error, ProducerQueueIsFull):
            record.outcome, record.error = Outcome.FAILED, repr(error)
        else:
            record.outcome, record.error = Outcome.UNKNOWN, repr(error)
        window.release()

    return done


async def read_back(service_url: str, history: History, topics: list[str], *, idle_s: float = 3.0) -> None:
    """Read every topic from its start into ``history.consumed``."""
    async with Client(service_url, operation_timeout_seconds=30) as client:
        for topic in topics:
            await _read_topic(client, history, topic, idle_s)


async def _read_topic(client: Client, history: History, topic: str, idle_s: float) -> None:
    """Until every acknowledged send was seen and nothing more came for ``idle_s``, or nothing
    at all came for :data:`STALL_S`. A position delivered again (a redelivery after a
    reconnection) is recorded once: the log holds it once."""
    expected = {(s.producer, s.sequence) for s in history.sends if s.topic == topic and s.outcome is Outcome.ACKED}
    consumer = await _subscribe(client, topic)
    seen: set[tuple[str, int]] = set()
    positions: set[tuple[int, int]] = set()
    last_message_s = time.monotonic()
    while time.monotonic() - last_message_s < STALL_S:
        wait_s = idle_s if expected <= seen else 5.0
        try:
            message = await consumer.receive(timeout_millis=int(wait_s * 1000))
        except Timeout:
            if expected <= seen:
                break
            continue
        last_message_s = time.monotonic()
        message_id = message.message_id()
        position = (message_id.ledger_id(), message_id.entry_id())
        if position in positions:
            continue
        positions.add(position)
        record = history.consume(topic, message.data(), position)
        if record.sender is not None:
            seen.add(record.sender)
    await consumer.close()


async def _subscribe(client: Client, topic: str) -> Consumer:
    deadline = time.monotonic() + STALL_S
    while True:
        try:
            consumer = await client.subscribe(topic, SUBSCRIPTION, initial_position=InitialPosition.Earliest)
            assert isinstance(consumer, Consumer)
            return consumer
        except MiniPulsarError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(RETRY_S)
