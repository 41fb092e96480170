"""The minipulsar Python client (asyncio-first), shaped like ``pulsar.asyncio``."""

from client.client import Client
from client.consumer import Consumer
from client.enums import ConsumerType, InitialPosition
from client.exceptions import AlreadyClosed, ConnectError, LookupError, ProducerQueueIsFull, PulsarException, Timeout
from client.message import Message, MessageId
from client.producer import Producer

__all__ = ["AlreadyClosed", "Client", "ConnectError", "Consumer", "ConsumerType", "InitialPosition",
           "LookupError", "Message", "MessageId", "Producer", "ProducerQueueIsFull", "PulsarException", "Timeout"]
