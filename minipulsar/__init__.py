"""minipulsar: a miniature Apache Pulsar / BookKeeper on asyncio.

The client API is re-exported here (``from minipulsar import Client``), lazily, so the
servers, which import ``minipulsar.*`` core modules, never load the client package.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_CLIENT_NAMES = {
    "AlreadyClosed", "Client", "ConnectError", "Consumer", "ConsumerType", "InitialPosition",
    "LookupError", "Message", "MessageId", "Producer", "ProducerQueueIsFull", "PulsarException", "Timeout",
    # partitioned topics, multi-topic and regex subscriptions, readers
    "HashingScheme", "MultiTopicsConsumer", "PartitionedProducer", "PartitionsRoutingMode", "Reader",
    # producer options, batch receive, the official client's error names
    "BatchingType", "CompressionType", "ConsumerBatchReceivePolicy", "ConsumerBusy", "MemoryBufferIsFull",
    "NotConnected", "ProducerBusy", "ServiceUnitNotReady", "TooManyLookupRequestException", "TopicNotFound",
}


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from minipulsar import client

        return getattr(client, name)
    raise AttributeError(f"module 'minipulsar' has no attribute {name!r}")


__all__ = sorted(_CLIENT_NAMES)
