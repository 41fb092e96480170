"""What topics count on the hot path: plain ints, read by the stats sampler and /metrics.

Invariant: every counter only grows; rates are derived from two readings
(:mod:`broker.topics.rates`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from minipulsar.broker.topics.exclusive_queue import ExclusiveQueue

if TYPE_CHECKING:
    pass


class ProducerConnection(Protocol):
    """The client connection a producer publishes on (the broker's BrokerConnection)."""

    def detach_producer(self, producer_id: int) -> bool:
        """Take the producer off this connection (its topic is unloaded); False when it is not on it."""
        ...

    def send_close_producer(self, producer_id: int, assigned_broker_url: str | None = None) -> None:
        """CLOSE_PRODUCER for a detached producer: the client looks its topic up again."""
        ...


class Publisher(Protocol):
    """A producer attached to a topic, as the stats and an unload see it (the broker's ProducerHandle)."""

    @property
    def producer_id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def connected_since(self) -> str: ...

    @property
    def client_version(self) -> str: ...

    @property
    def access_mode(self) -> str: ...

    @property
    def messages_in(self) -> int: ...

    @property
    def bytes_in(self) -> int: ...

    @property
    def connection(self) -> ProducerConnection: ...

    def drained(self) -> asyncio.Future[None] | None:
        """None when none of this producer's SENDs is being written, else a future done once
        every one that is has been answered (adds complete in order)."""
        ...


@dataclass(slots=True)
class TopicCounters:
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    producers: dict[tuple[int, int], Publisher] = field(default_factory=dict)
    """(connection identity, producer id) → the producer."""
    exclusive_queue: ExclusiveQueue = field(init=False)
    """Producers waiting for exclusive access (WaitForExclusive)."""

    def __post_init__(self) -> None:
        self.exclusive_queue = ExclusiveQueue(lambda: bool(self.producers))

    def remove_producer(self, key: tuple[int, int]) -> None:
        """Take a producer off the topic; the first producer waiting for exclusive access gets
        its turn once none is left."""
        if self.producers.pop(key, None) is not None:
            self.exclusive_queue.grant_next()
