"""Commands to bytes and back. Sans-IO: feed bytes, take commands; encode a command to frames.

:class:`CommandDecoder` layers msgpack and schema validation over :class:`FrameDecoder`. A bad
frame *length* is fatal (:class:`FrameTooLargeError`: the stream cannot be re-synchronised); a
bad *body* is not (:class:`MalformedCommandError`: that one frame is skipped and the peer can be
answered), because the next frame still starts at a known offset.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Protocol

import msgpack

from minipulsar.errors import MalformedCommandError
from minipulsar.protocol.commands import AddEntry, AddEntryResponse, Message, Send, SendReceipt
from minipulsar.protocol.frames import DEFAULT_MAX_FRAME_SIZE, LENGTH, PIPELINE_CAPACITY, FrameDecoder
from minipulsar.protocol.schema import Command, decode_command

_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_unpackb = msgpack.unpackb

MSGPACK_ERRORS: tuple[type[Exception], ...] = (ValueError, msgpack.UnpackException)
"""What msgpack raises on bytes that are not msgpack: ``ValueError`` (incomplete input, a bad
UTF-8 string, a map key of the wrong type, a length over the limits) and its own
``FormatError``/``StackError``."""
MSGPACK_SHAPE_ERRORS: tuple[type[Exception], ...] = (*MSGPACK_ERRORS, TypeError)
"""Those, and the ``TypeError`` of unpacking a decoded value of the wrong shape (``a, b = 5``)."""
_pack_length = LENGTH.pack
_U32 = struct.Struct(">I")


def encode(command: Command) -> tuple[bytes, bytes]:
    """``(length prefix, body)`` for ``command``: write both with one ``writelines``."""
    body = _packb(command.to_wire())
    return _pack_length(len(body)), body


# ADD_ENTRY_RESPONSE as a fixed layout: the map ``encode(AddEntryResponse(...))`` sends (same
# keys, same order), every integer as msgpack int64 (0xd3). A bookie sends one per add.
_ADD_RESPONSE_KEYS = (b"\x84\xa1t\xb2ADD_ENTRY_RESPONSE\xa2id\xd3", b"\xa9ledger_id\xd3", b"\xa8entry_id\xd3")
_ADD_RESPONSE = struct.Struct(">I" + "".join(f"{len(key)}sq" for key in _ADD_RESPONSE_KEYS))
_ADD_RESPONSE_BODY_BYTES = _ADD_RESPONSE.size - LENGTH.size
_unpack_add_response = _ADD_RESPONSE.unpack_from


class AddRequest(Protocol):
    """What an ADD_ENTRY_RESPONSE answers (an :class:`AddEntry`, or anything holding its ids)."""

    @property
    def id(self) -> int: ...
    @property
    def ledger_id(self) -> int: ...
    @property
    def entry_id(self) -> int: ...


def encode_add_entry_responses(requests: Sequence[AddRequest]) -> bytes:
    """The ADD_ENTRY_RESPONSE frames answering ``requests``, joined: one buffer for a whole
    run of adds."""
    pack, size = _ADD_RESPONSE.pack, _ADD_RESPONSE_BODY_BYTES
    k0, k1, k2 = _ADD_RESPONSE_KEYS
    try:
        return b"".join([pack(size, k0, r.id, k1, r.ledger_id, k2, r.entry_id) for r in requests])
    except struct.error:  # an id outside int64 somewhere: frame by frame
        return b"".join([encode_add_entry_response(r.id, r.ledger_id, r.entry_id) for r in requests])


def encode_add_entry_response(request_id: int, ledger_id: int, entry_id: int) -> bytes:
    """One whole ADD_ENTRY_RESPONSE frame (length prefix included) in one ``struct.pack``,
    ~4x cheaper than building the command and encoding it; decodes to the same command."""
    k0, k1, k2 = _ADD_RESPONSE_KEYS
    try:
        return _ADD_RESPONSE.pack(_ADD_RESPONSE_BODY_BYTES, k0, request_id, k1, ledger_id, k2, entry_id)
    except struct.error:  # an id outside int64 (msgpack also has uint64): the general path
        header, body = encode(AddEntryResponse(id=request_id, ledger_id=ledger_id, entry_id=entry_id))
        return header + body


# MESSAGE (broker -> consumer) as a fixed header and the entry payload apart: the same map as
# ``encode(Message(...))`` (payload last, integers as int64, the payload as bin 32), so the
# payload, often tens of KiB, goes to ``writelines`` as it came from the bookie or the cache,
# never copied into a packed body.
_MESSAGE_KEYS = (
    b"\x86\xa1t\xa7MESSAGE\xabconsumer_id\xd3",
    b"\xa9ledger_id\xd3",
    b"\xa8entry_id\xd3",
    b"\xb0redelivery_count\xd3",
    b"\xa7payload\xc6",
)
_MESSAGE_HEADER = struct.Struct(
    ">I" + "".join(f"{len(key)}sq" for key in _MESSAGE_KEYS[:4]) + f"{len(_MESSAGE_KEYS[4])}sI"
)
_MESSAGE_HEADER_BODY_BYTES = _MESSAGE_HEADER.size - LENGTH.size


def encode_message(
    consumer_id: int, ledger_id: int, entry_id: int, payload: bytes, redelivery_count: int = 0
) -> tuple[bytes, bytes]:
    """``(length prefix + header, payload)`` of one MESSAGE frame: write both with one
    ``writelines``; decodes to ``Message(consumer_id, ledger_id, entry_id, payload,
    redelivery_count)`` as :func:`encode`'s frame does."""
    k0, k1, k2, k3, k4 = _MESSAGE_KEYS
    size = len(payload)
    try:
        header = _MESSAGE_HEADER.pack(
            _MESSAGE_HEADER_BODY_BYTES + size,
            k0,
            consumer_id,
            k1,
            ledger_id,
            k2,
            entry_id,
            k3,
            redelivery_count,
            k4,
            size,
        )
    except struct.error:  # an id outside int64: the general path
        return encode(
            Message(
                consumer_id=consumer_id,
                ledger_id=ledger_id,
                entry_id=entry_id,
                payload=payload,
                redelivery_count=redelivery_count,
            )
        )
    return header, payload


# ADD_ENTRY as a fixed layout with the payload last: the frame is ``prefix`` (length prefix,
# every field, the payload's bin32 header and the entry's digest head) followed by the payload
# buffer itself, so a writer sends the caller's payload with ``writelines`` and never copies it
# into a msgpack buffer. Any msgpack reader decodes it to the very AddEntry of :func:`encode`
# (a map is a map whatever its key order); integers go as int64, ``recovery`` as a bool,
# ``master_key`` as bin8.
_ADD_KEYS = (
    b"\x88\xa1t\xa9ADD_ENTRY\xa2id\xd3",
    b"\xa9ledger_id\xd3",
    b"\xa8entry_id\xd3",
    b"\xa3lac\xd3",
    b"\xa8recovery",
    b"\xaamaster_key\xc4",
)
_ADD_PAYLOAD_KEY = b"\xa7payload\xc6"
_add_layouts: dict[tuple[int, int], struct.Struct] = {}
_BOOLS = (b"\xc2", b"\xc3")


def _add_layout(key_bytes: int, head_bytes: int) -> struct.Struct:
    layout = _add_layouts.get((key_bytes, head_bytes))
    if layout is None:
        k0, k1, k2, k3, k4, k5 = (f"{len(key)}s" for key in _ADD_KEYS)
        fields = f">I{k0}q{k1}q{k2}q{k3}q{k4}c{k5}B{key_bytes}s{len(_ADD_PAYLOAD_KEY)}sI{head_bytes}s"
        layout = _add_layouts[(key_bytes, head_bytes)] = struct.Struct(fields)
    return layout


_ADD_FIXED = struct.Struct(">" + "".join(f"{len(key)}s{kind}" for key, kind in zip(_ADD_KEYS, "qqqqcB", strict=True)))
"""The fields of an :func:`encode_add_entry` frame's body up to the master key's bytes."""
_ADD_PAYLOAD_HEADER = struct.Struct(f">{len(_ADD_PAYLOAD_KEY)}sI")
_ADD_ENTRY_MIN_BYTES = _ADD_FIXED.size + _ADD_PAYLOAD_HEADER.size


def _decode_add_entry(view: memoryview, start: int, end: int) -> AddEntry | None:
    """The AddEntry in ``view[start:end]`` if it is in :func:`encode_add_entry`'s layout (else
    None: msgpack decides): the fields with two ``struct`` unpacks, the payload with one copy."""
    if end - start < _ADD_ENTRY_MIN_BYTES:
        return None
    k0, rid, k1, ledger_id, k2, entry_id, k3, lac, k4, recovery, k5, key_bytes = _ADD_FIXED.unpack_from(view, start)
    if (k0, k1, k2, k3, k4, k5) != _ADD_KEYS or recovery not in _BOOLS:
        return None
    key_start = start + _ADD_FIXED.size
    payload_start = key_start + key_bytes + _ADD_PAYLOAD_HEADER.size
    if payload_start > end:
        return None
    payload_key, size = _ADD_PAYLOAD_HEADER.unpack_from(view, key_start + key_bytes)
    if payload_key != _ADD_PAYLOAD_KEY or payload_start + size != end:
        return None
    master_key = bytes(view[key_start : key_start + key_bytes])
    return AddEntry(rid, ledger_id, entry_id, bytes(view[payload_start:end]), lac, recovery == b"\xc3", master_key)


def encode_add_entry(
    request_id: int,
    ledger_id: int,
    entry_id: int,
    lac: int,
    recovery: bool,
    master_key: bytes,
    head: bytes,
    payload: bytes | memoryview,
) -> bytes:
    """The start of the ADD_ENTRY frame whose payload is ``head + payload``; ``payload``
    follows it on the wire unchanged (``writer.write(prefix, payload)``): one ``struct.pack``,
    no copy of the payload. Decodes to ``AddEntry(..., payload=head + payload)``."""
    size = len(head) + len(payload)
    layout = _add_layout(len(master_key), len(head))
    k0, k1, k2, k3, k4, k5 = _ADD_KEYS
    try:
        if len(master_key) > 255:
            raise struct.error("a master key longer than bin8")
        return layout.pack(
            layout.size - LENGTH.size + len(payload),
            k0,
            request_id,
            k1,
            ledger_id,
            k2,
            entry_id,
            k3,
            lac,
            k4,
            _BOOLS[recovery],
            k5,
            len(master_key),
            master_key,
            _ADD_PAYLOAD_KEY,
            size,
            head,
        )
    except struct.error:  # a value outside int64 or bin8 (msgpack also has uint64, bin16): field by field
        fields = {"t": AddEntry.TYPE, "id": request_id, "ledger_id": ledger_id, "entry_id": entry_id, "lac": lac}
        fields |= {"recovery": recovery, "master_key": master_key}
        body = b"".join([b"\x88", *(_packb(key) + _packb(value) for key, value in fields.items()), _ADD_PAYLOAD_KEY])
        body += _U32.pack(size) + head
        return _pack_length(len(body) + len(payload)) + body


# SEND (client -> broker) as a fixed header and the payload apart: the map of ``encode(Send(...))``
# with the payload last, every integer as int64 and the payload as bin 32, so a producer writes
# its batch with ``writelines`` uncopied and the broker reads the fields with one ``struct``
# unpack. Any msgpack reader decodes it to the very Send of :func:`encode`.
_SEND_KEYS = (
    b"\x86\xa1t\xa4SEND\xabproducer_id\xd3",
    b"\xabsequence_id\xd3",
    b"\xacnum_messages\xd3",
    b"\xb3highest_sequence_id\xd3",
    b"\xa7payload\xc6",
)
_SEND_HEADER = struct.Struct(">I" + "".join(f"{len(key)}sq" for key in _SEND_KEYS[:4]) + f"{len(_SEND_KEYS[4])}sI")
_SEND_HEADER_BODY_BYTES = _SEND_HEADER.size - LENGTH.size
"""The body bytes of a SEND before its payload (more than ``_ADD_ENTRY_MIN_BYTES``, which
:meth:`CommandDecoder.next_command` tests first)."""
_unpack_send_header = _SEND_HEADER.unpack_from


def encode_send(command: Send) -> tuple[bytes, bytes]:
    """``(length prefix + header, payload)`` of one SEND frame: write both with one
    ``writelines``; decodes to ``command`` as :func:`encode`'s frame does."""
    k0, k1, k2, k3, k4 = _SEND_KEYS
    payload = command.payload
    size = len(payload)
    try:
        header = _SEND_HEADER.pack(
            _SEND_HEADER_BODY_BYTES + size,
            k0,
            command.producer_id,
            k1,
            command.sequence_id,
            k2,
            command.num_messages,
            k3,
            command.highest_sequence_id,
            k4,
            size,
        )
    except struct.error:  # a value outside int64 (msgpack also has uint64), or not an int: the general path
        return encode(command)
    return header, payload


def _decode_send(view: memoryview, start: int, end: int) -> Send | None:
    """The Send in ``view[start:end]`` if it is in :func:`encode_send`'s layout (else None:
    msgpack decides): the fields with one ``struct`` unpack, the payload with one copy."""
    _, k0, producer_id, k1, sequence_id, k2, num_messages, k3, highest, k4, size = _unpack_send_header(
        view, start - LENGTH.size
    )
    payload_start = start + _SEND_HEADER_BODY_BYTES
    if (k0, k1, k2, k3, k4) != _SEND_KEYS or payload_start + size != end:
        return None
    return Send(producer_id, sequence_id, bytes(view[payload_start:end]), num_messages, highest)


def encode_parts(command: Command) -> tuple[bytes, bytes]:
    """``(first, second)``: the frame of ``command`` is ``first + second``, written with one
    ``writelines`` — a SEND in :func:`encode_send`'s layout, any other command as :func:`encode`."""
    if command.__class__ is Send:
        return encode_send(command)
    return encode(command)


# SEND_RECEIPT as a fixed layout: the map ``encode(SendReceipt(...))`` sends (same keys, same
# order), every integer as msgpack int64. The broker sends one per entry.
_RECEIPT_KEYS = (
    b"\x85\xa1t\xacSEND_RECEIPT\xabproducer_id\xd3",
    b"\xabsequence_id\xd3",
    b"\xa9ledger_id\xd3",
    b"\xa8entry_id\xd3",
)
_RECEIPT = struct.Struct(">I" + "".join(f"{len(key)}sq" for key in _RECEIPT_KEYS))


def encode_send_receipt(producer_id: int, sequence_id: int, ledger_id: int, entry_id: int) -> bytes:
    """One whole SEND_RECEIPT frame (length prefix included) in one ``struct.pack``; decodes
    to the same command as ``encode(SendReceipt(...))``."""
    k0, k1, k2, k3 = _RECEIPT_KEYS
    try:
        return _RECEIPT.pack(_RECEIPT.size - LENGTH.size, k0, producer_id, k1, sequence_id, k2, ledger_id, k3, entry_id)
    except struct.error:  # an id outside int64: the general path
        command = SendReceipt(producer_id=producer_id, sequence_id=sequence_id, ledger_id=ledger_id, entry_id=entry_id)
        return encode_bytes(command)


def encode_bytes(command: Command) -> bytes:
    """One ``bytes`` frame (tests and cold paths; hot paths use :func:`encode`)."""
    header, body = encode(command)
    return header + body


def decode_body(body: bytes) -> Command:
    """The command in one frame body.

    Raises:
        MalformedCommandError: the body is not msgpack, or not a valid command.
    """
    try:
        wire = _unpackb(body, raw=False)
    except MSGPACK_ERRORS as exc:
        raise MalformedCommandError(f"frame body is not valid msgpack: {exc}") from exc
    return decode_command(wire)


class CommandDecoder:
    """Bytes in, commands out.

    Bodies are unpacked straight from the frame decoder's buffer (a memoryview slice): the
    only copy of a payload is the ``bytes`` msgpack makes of it. An ADD_ENTRY_RESPONSE in the
    fixed layout of :func:`encode_add_entry_response` (what our bookies send) and a SEND in
    :func:`encode_send`'s (what our producers send) are read with one ``struct`` unpack instead,
    and an ADD_ENTRY in :func:`encode_add_entry`'s layout (what our brokers send) with two; any
    other encoding goes through msgpack. Both give the very command
    msgpack would have: the short cut only skips the dict.
    """

    __slots__ = ("_frames", "buffer_updated", "get_buffer")

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, pipeline_capacity: int = PIPELINE_CAPACITY
    ) -> None:
        self._frames = FrameDecoder(max_frame_size, pipeline_capacity)
        # Read straight into the frame buffer (asyncio.BufferedProtocol); bound once.
        self.get_buffer = self._frames.get_buffer
        self.buffer_updated = self._frames.buffer_updated

    @property
    def max_frame_size(self) -> int:
        return self._frames.max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.feed(data)

    def next_command(self) -> Command | None:
        """The next command, ``None`` when more bytes are needed.

        Raises:
            FrameTooLargeError: fatal; close the connection.
            MalformedCommandError: this frame was skipped; the decoder stays usable.
        """
        frames = self._frames
        span = frames.next_span()
        if span is None:
            return None
        start, end = span
        view = frames.view
        length = end - start
        if length == _ADD_RESPONSE_BODY_BYTES:  # the size of a fixed-layout ADD_ENTRY_RESPONSE
            _, k0, request_id, k1, ledger_id, k2, entry_id = _unpack_add_response(view, start - LENGTH.size)
            if (k0, k1, k2) == _ADD_RESPONSE_KEYS:  # the very map msgpack would decode: skip msgpack
                return AddEntryResponse(request_id, ledger_id, entry_id)
        elif length > _ADD_ENTRY_MIN_BYTES:  # shorter than either fixed layout below
            kind = view[start + 4]  # the first letter of "t": {"t": "S…" / "A…"
            if kind == 0x53 and length >= _SEND_HEADER_BODY_BYTES:  # maybe SEND
                send = _decode_send(view, start, end)
                if send is not None:
                    return send
            elif kind == 0x41:  # maybe ADD_ENTRY
                add = _decode_add_entry(view, start, end)
                if add is not None:
                    return add
        try:
            wire = _unpackb(view[start:end], raw=False)
        except MSGPACK_ERRORS as exc:
            raise MalformedCommandError(f"frame body is not valid msgpack: {exc}") from exc
        return decode_command(wire)

    def compact(self) -> None:
        self._frames.compact()

    def discard(self) -> None:
        """Drop everything buffered (a connection that stopped reading its peer)."""
        self._frames.discard()

    @property
    def buffered_bytes(self) -> int:
        return self._frames.buffered_bytes


class MsgpackWire(CommandDecoder):
    """minipulsar's own protocol as a connection's wire (``minipulsar.net.connection.Wire``):
    :class:`CommandDecoder` in, :func:`encode_parts` out."""

    __slots__ = ()

    encode = staticmethod(encode_parts)
    encode_message = staticmethod(encode_message)

    @staticmethod
    def encode_send_receipt(
        producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int
    ) -> bytes:
        """:func:`encode_send_receipt` (ours carries no highest sequence id: the client knows its batch)."""
        return encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id)
