"""minipulsar: a miniature Apache Pulsar / BookKeeper on asyncio.

The client API is re-exported here (``from minipulsar import Client``), lazily: the servers
import the core modules under ``minipulsar.*`` and never load the client package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minipulsar.client import (
        AlreadyClosed,
        BatchingType,
        Client,
        CompressionType,
        ConnectError,
        Consumer,
        ConsumerBatchReceivePolicy,
        ConsumerBusy,
        ConsumerType,
        HashingScheme,
        InitialPosition,
        LookupError,
        MemoryBufferIsFull,
        Message,
        MessageId,
        MultiTopicsConsumer,
        NotConnected,
        PartitionedProducer,
        PartitionsRoutingMode,
        Producer,
        ProducerBusy,
        ProducerQueueIsFull,
        PulsarException,
        Reader,
        ServiceUnitNotReady,
        Timeout,
        TooManyLookupRequestException,
        TopicNotFound,
    )

__version__ = "0.1.0"

__all__ = [
    "AlreadyClosed",
    "BatchingType",
    "Client",
    "CompressionType",
    "ConnectError",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerBusy",
    "ConsumerType",
    "HashingScheme",
    "InitialPosition",
    "LookupError",
    "MemoryBufferIsFull",
    "Message",
    "MessageId",
    "MultiTopicsConsumer",
    "NotConnected",
    "PartitionedProducer",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerBusy",
    "ProducerQueueIsFull",
    "PulsarException",
    "Reader",
    "ServiceUnitNotReady",
    "Timeout",
    "TooManyLookupRequestException",
    "TopicNotFound",
]
_CLIENT_NAMES = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from minipulsar import client

        return getattr(client, name)
    raise AttributeError(f"module 'minipulsar' has no attribute {name!r}")
