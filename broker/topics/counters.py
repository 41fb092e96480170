"""What topics count on the hot path: plain ints, read by the stats sampler and /metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class Publisher(Protocol):
    """A producer attached to a topic, as the stats see it (the broker's ProducerHandle)."""

    producer_id: int
    name: str
    address: str
    connected_since: str
    messages_in: int
    bytes_in: int


@dataclass
class TopicCounters:
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    producers: dict[tuple[int, int], Publisher] = field(default_factory=dict)
    """(connection identity, producer id) → the producer."""
