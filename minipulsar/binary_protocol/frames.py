"""Pulsar's framing: a byte stream in, :class:`PulsarFrame` out, and back. Sans-IO.

A frame (Pulsar's ``Commands.serializeWithSize`` / ``newSend``, all integers big-endian)::

    simple:   [totalSize u32][commandSize u32][BaseCommand]
    payload:  [totalSize u32][commandSize u32][BaseCommand][headers and payload]

    headers and payload = [0x0e01 u16][crc32c u32]             (optional: the checksum)
                          [metadataSize u32][MessageMetadata][payload]

``totalSize`` counts everything after itself, so the frame is minipulsar's own framing (a
``u32`` length, then that many bytes) and :class:`PulsarFrameDecoder` reuses
:class:`minipulsar.protocol.frames.FrameDecoder` for the stream (its buffer, its
``BufferedProtocol`` read path, its refusal of an oversized frame before buffering its body).
The body is then ``commandSize`` + command + whatever follows. SEND (producer → broker) and
MESSAGE (broker → consumer) carry the headers and payload; :attr:`PulsarFrame.headers_and_payload`
is those bytes exactly as received: the broker stores them as the entry, checksum included,
and a consumer's MESSAGE carries them back unchanged (``encode_payload_command``: written
beside the command, never concatenated).

Invariants of :class:`PulsarFrameDecoder`:
- a frame is consumed (the stream moves past its ``totalSize``) before its body is
  interpreted, so a malformed command raises :class:`MalformedCommandError` and the next
  call reads the next frame: one bad command never desyncs the stream;
- ``totalSize`` above ``max_frame_size`` raises :class:`FrameTooLargeError` before any of
  that frame's body is buffered (fatal: the connection closes, as Pulsar's does);
- a returned command passed ``IsInitialized()``: every ``required`` field of the command and
  of the sub-message its ``type`` names is present (upb's parser does not check this itself).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
from google.protobuf.message import DecodeError

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol.frames import FrameDecoder

MAGIC_CRC32C = 0x0E01
"""Starts the optional checksum of a message's headers and payload (Pulsar's ``magicCrc32c``)."""
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
"""Starts the broker's own metadata in front of a stored entry (``magicBrokerEntryMetadata``)."""

FRAME_PADDING = 10 * 1024
"""Room for the command and headers around a message (Pulsar's ``MESSAGE_SIZE_FRAME_PADDING``)."""
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's ``maxMessageSize`` default: what CONNECTED announces unless configured otherwise."""
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
"""Pulsar's broker refuses frames above ``maxMessageSize + MESSAGE_SIZE_FRAME_PADDING``."""

_U32 = struct.Struct(">I")
_SIZES = struct.Struct(">II")  # totalSize, commandSize
_CHECKSUM = struct.Struct(">HI")  # magic, crc32c
_U32_SIZE = _U32.size
_unpack_u32 = _U32.unpack_from
_pack_sizes = _SIZES.pack


@dataclass(slots=True)
class PulsarFrame:
    """One frame: its command and, for SEND and MESSAGE, what followed the command."""

    command: api.BaseCommand
    """The parsed envelope; ``command.type`` names the one sub-message that is set."""
    headers_and_payload: bytes | None
    """Everything after the command (checksum, metadata, payload), unchanged; ``None`` when
    nothing followed it (every command but SEND and MESSAGE)."""


class PulsarFrameDecoder:
    """Turns a byte stream into :class:`PulsarFrame`.

    Put bytes in with :meth:`feed` (or :meth:`get_buffer` + :meth:`buffer_updated`), take
    frames with :meth:`next_frame` until it returns ``None``, then call :meth:`compact` once.
    """

    __slots__ = ("_frames",)

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._frames = FrameDecoder(max_frame_size)

    @property
    def max_frame_size(self) -> int:
        return self._frames.max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.feed(data)

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Free space to read into (``asyncio.BufferedProtocol``); then :meth:`buffer_updated`."""
        return self._frames.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)

    def next_frame(self) -> PulsarFrame | None:
        """The next complete frame, or ``None`` when more bytes are needed.

        Raises:
            FrameTooLargeError: the next frame announces more than ``max_frame_size`` bytes.
            MalformedCommandError: the frame was consumed but its command is not a valid
                ``BaseCommand`` (the next call reads the frame after it).
        """
        span = self._frames.next_span()
        if span is None:
            return None
        start, end = span
        view = self._frames.view
        if end - start < _U32_SIZE:
            raise MalformedCommandError(f"Pulsar frame of {end - start} bytes has no commandSize")
        (command_size,) = _unpack_u32(view, start)
        command_end = start + _U32_SIZE + command_size
        if command_end > end:
            raise MalformedCommandError(
                f"Pulsar commandSize {command_size} exceeds its frame's {end - start - _U32_SIZE} bytes"
            )
        command = parse_command(view[start + _U32_SIZE : command_end])
        rest = bytes(view[command_end:end]) if command_end < end else None
        return PulsarFrame(command, rest)

    def compact(self) -> None:
        """Once per read, not per frame (see :meth:`FrameDecoder.compact`)."""
        self._frames.compact()

    @property
    def buffered_bytes(self) -> int:
        return self._frames.buffered_bytes


def parse_command(data: bytes | memoryview) -> api.BaseCommand:
    """A serialized ``BaseCommand``, checked for its required fields.

    Raises:
        MalformedCommandError: not a ``BaseCommand``, or one missing a required field (an
            unknown ``type`` value reads as a missing ``type``).
    """
    command = api.BaseCommand()
    try:
        command.ParseFromString(data)
    except DecodeError as exc:
        raise MalformedCommandError(f"Pulsar command does not parse: {exc}") from exc
    if not command.IsInitialized():
        missing = ", ".join(command.FindInitializationErrors()) or "?"
        raise MalformedCommandError(f"Pulsar command misses required fields: {missing}")
    return command


def encode_command(command: api.BaseCommand) -> bytes:
    """``[totalSize][commandSize][command]``: a frame without payload.

    Raises:
        google.protobuf.message.EncodeError: a required field is unset (a bug of the caller).
    """
    body: bytes = command.SerializeToString()
    return _pack_sizes(len(body) + _U32_SIZE, len(body)) + body


def encode_payload_command(
    command: api.BaseCommand, headers_and_payload: bytes | memoryview
) -> tuple[bytes, bytes | memoryview]:
    """A SEND or MESSAGE frame as ``(header, body)``, for ``transport.writelines``: the
    header is ``[totalSize][commandSize][command]`` and the body ``headers_and_payload``
    itself, so a dispatched entry goes out uncopied."""
    body: bytes = command.SerializeToString()
    total_size = _U32_SIZE + len(body) + len(headers_and_payload)
    return _pack_sizes(total_size, len(body)) + body, headers_and_payload


def encode_headers_and_payload(metadata: api.MessageMetadata, payload: bytes, *, checksum: bool = True) -> bytes:
    """``[0x0e01][crc32c][metadataSize][metadata][payload]`` (without the first two when
    ``checksum`` is false). The crc32c covers ``metadataSize`` through the payload's end, as
    Pulsar's ``Commands.newSend`` computes it."""
    serialized: bytes = metadata.SerializeToString()
    checked = _U32.pack(len(serialized)) + serialized + payload
    if not checksum:
        return checked
    return _CHECKSUM.pack(MAGIC_CRC32C, crc32c.crc32c(checked)) + checked
