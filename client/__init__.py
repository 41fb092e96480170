"""The minipulsar Python client (asyncio-first), shaped like ``pulsar.asyncio``."""

from minipulsar.client.client import Client
from minipulsar.client.consumer import Consumer
from minipulsar.client.consumer_config import ConsumerBatchReceivePolicy
from minipulsar.client.enums import BatchingType, CompressionType, ConsumerType, InitialPosition
from minipulsar.client.exceptions import (
    AlreadyClosed,
    ConnectError,
    ConsumerBusy,
    LookupError,
    MemoryBufferIsFull,
    NotConnected,
    ProducerBusy,
    ProducerQueueIsFull,
    PulsarException,
    ServiceUnitNotReady,
    Timeout,
    TooManyLookupRequestException,
    TopicNotFound,
)
from minipulsar.client.message import Message, MessageId
from minipulsar.client.multi_topics_consumer import MultiTopicsConsumer
from minipulsar.client.partitioned_producer import PartitionedProducer
from minipulsar.client.producer import Producer
from minipulsar.client.reader import Reader
from minipulsar.client.routing import HashingScheme, PartitionsRoutingMode

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
