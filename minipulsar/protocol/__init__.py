"""The wire protocol: frames, commands and their codec. Sans-IO: never imports asyncio."""

from minipulsar.protocol import commands
from minipulsar.protocol.codec import CommandDecoder, decode_body, encode, encode_bytes
from minipulsar.protocol.frames import DEFAULT_MAX_FRAME_SIZE
from minipulsar.protocol.schema import REGISTRY, Command

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "REGISTRY",
    "Command",
    "CommandDecoder",
    "commands",
    "decode_body",
    "encode",
    "encode_bytes",
]
