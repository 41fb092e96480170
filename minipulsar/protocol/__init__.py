"""The wire protocol: frames, commands and their codec. Sans-IO: never imports asyncio.

The wire enumerations (``Literal`` types, checked when a command is decoded) are exported
here for the code that builds and reads commands.
"""

from minipulsar.protocol import commands
from minipulsar.protocol.codec import CommandDecoder, decode_body, encode, encode_bytes
from minipulsar.protocol.commands import (
    AckType,
    KeySharedMode,
    LookupType,
    NotificationKind,
    SubscriptionInitialPosition,
    SubscriptionType,
    TopicsOfNamespaceMode,
)
from minipulsar.protocol.compression import CompressionCodec
from minipulsar.protocol.frames import DEFAULT_MAX_FRAME_SIZE
from minipulsar.protocol.schema import REGISTRY, Command

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "REGISTRY",
    "AckType",
    "Command",
    "CommandDecoder",
    "CompressionCodec",
    "KeySharedMode",
    "LookupType",
    "NotificationKind",
    "SubscriptionInitialPosition",
    "SubscriptionType",
    "TopicsOfNamespaceMode",
    "commands",
    "decode_body",
    "encode",
    "encode_bytes",
]
