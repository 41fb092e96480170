"""Commands to bytes and back. Sans-IO: feed bytes, take commands; encode a command to frames.

:class:`CommandDecoder` layers msgpack and schema validation over :class:`FrameDecoder`. A bad
frame *length* is fatal (:class:`FrameTooLargeError`: the stream cannot be re-synchronised); a
bad *body* is not (:class:`InvalidCommandError`: that one frame is skipped and the peer can be
answered), because the next frame still starts at a known offset.
"""

from __future__ import annotations

import msgpack

from minipulsar.errors import InvalidCommandError
from minipulsar.protocol.frames import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, frame_header
from minipulsar.protocol.schema import Command, decode_command

_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack


def encode(command: Command) -> tuple[bytes, bytes]:
    """``(length prefix, body)`` for ``command``: write both with one ``writelines``."""
    body = _packb(command.to_wire())
    return frame_header(len(body)), body


def encode_bytes(command: Command) -> bytes:
    """One ``bytes`` frame (tests and cold paths; hot paths use :func:`encode`)."""
    header, body = encode(command)
    return header + body


def decode_body(body: bytes) -> Command:
    """The command in one frame body.

    Raises:
        InvalidCommandError: the body is not msgpack, or not a valid command.
    """
    try:
        wire = msgpack.unpackb(body, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise InvalidCommandError(f"frame body is not valid msgpack: {exc}") from exc
    return decode_command(wire)


class CommandDecoder:
    """Bytes in, commands out."""

    __slots__ = ("_frames",)

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._frames = FrameDecoder(max_frame_size)

    @property
    def max_frame_size(self) -> int:
        return self._frames.max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.feed(data)

    def next_command(self) -> Command | None:
        """The next command, ``None`` when more bytes are needed.

        Raises:
            FrameTooLargeError: fatal; close the connection.
            InvalidCommandError: this frame was skipped; the decoder stays usable.
        """
        body = self._frames.next_frame()
        if body is None:
            return None
        return decode_body(body)

    def compact(self) -> None:
        self._frames.compact()
