"""What topics count on the hot path: plain ints, read by the stats sampler and /metrics.

Invariant: every counter only grows; rates are derived from two readings
(:mod:`broker.topics.rates`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

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
