"""The minipulsar Python client (asyncio-first), shaped like ``pulsar.asyncio``."""

from minipulsar.client.client import Client
from minipulsar.client.consumer import Consumer
from minipulsar.client.enums import ConsumerType, InitialPosition
from minipulsar.client.exceptions import AlreadyClosed, ConnectError, LookupError, ProducerQueueIsFull, PulsarException, Timeout
from minipulsar.client.message import Message, MessageId
from minipulsar.client.producer import Producer

__all__ = ["AlreadyClosed", "Client", "ConnectError", "Consumer", "ConsumerType", "InitialPosition",
           "LookupError", "Message", "MessageId", "Producer", "ProducerQueueIsFull", "PulsarException", "Timeout"]

# I: client core — producer options, batch receive, the official client's error names
from minipulsar.client.consumer_config import ConsumerBatchReceivePolicy  # noqa: E402
from minipulsar.client.enums import BatchingType, CompressionType  # noqa: E402
from minipulsar.client.exceptions import (  # noqa: E402
    ConsumerBusy,
    MemoryBufferIsFull,
    NotConnected,
    ProducerBusy,
    ServiceUnitNotReady,
    TooManyLookupRequestException,
    TopicNotFound,
)

__all__ += ["BatchingType", "CompressionType", "ConsumerBatchReceivePolicy", "ConsumerBusy", "MemoryBufferIsFull",
            "NotConnected", "ProducerBusy", "ServiceUnitNotReady", "TooManyLookupRequestException", "TopicNotFound"]

# J: partitioned topics, multi-topic and regex subscriptions, readers
from minipulsar.client.multi_topics_consumer import MultiTopicsConsumer  # noqa: E402
from minipulsar.client.partitioned_producer import PartitionedProducer  # noqa: E402
from minipulsar.client.reader import Reader  # noqa: E402
from minipulsar.client.routing import HashingScheme, PartitionsRoutingMode  # noqa: E402

__all__ += ["HashingScheme", "MultiTopicsConsumer", "PartitionedProducer", "PartitionsRoutingMode", "Reader"]
