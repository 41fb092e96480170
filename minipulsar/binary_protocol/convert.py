"""An entry in one protocol's format → the other's, for a consumer of the other protocol.

The broker stores each entry as its producer sent it — a msgpack batch
(:mod:`minipulsar.protocol.batch`) from minipulsar's producers, headers and payload
(:mod:`.entry`) from Pulsar's — and converts only when a consumer of the other protocol reads
it: a topic written and read by one kind of client never pays for the other.

Message fields, ours ↔ Pulsar's ``SingleMessageMetadata``:

============================  ==================================================================
minipulsar ``BatchMessage``   Pulsar
============================  ==================================================================
``sequence_id``               ``sequence_id`` (absent: the entry's ``sequence_id`` + the index)
``data``; ``None``            the payload; ``null_value`` and an empty payload
``key``                       ``partition_key``
``ordering_key`` (str)        ``ordering_key`` (bytes): UTF-8, see below
``properties`` (dict)         ``properties`` (``KeyValue`` list); empty ↔ ``None``
``event_time_ms`` (0: unset)  ``event_time`` (0: unset)
batch ``producer_name``,      ``MessageMetadata.producer_name``, ``publish_time``
``publish_time_ms``
============================  ==================================================================

Pulsar's ordering key is bytes, ours a string (a msgpack str, so valid UTF-8): ours is
written as its UTF-8 bytes, and Pulsar's read as UTF-8 with any byte that is not UTF-8 as a
``\\xNN`` escape (``errors="backslashreplace"``). The escape can make two distinct keys one
string (``b"\\xff"`` and the text ``\\xff``); that only merges keys onto one consumer, which
keeps each key's order — a split would not. The same rule reads a partition key that is not
UTF-8 (upb hands such a proto2 string over as bytes).

A minipulsar batch of several messages becomes a Pulsar batch; one of a single message
becomes a lone message, its fields in the entry's ``MessageMetadata``: our client numbers a
one-message entry's message without a batch index (-1), and so do Pulsar's clients for a lone
message, so both clients give the message the same id. (The other way cannot be kept: a
Pulsar batch that holds one message has batch index 0 for the official clients and -1 for
ours, whose entries do not say whether they were batched.)

Compression: a converted entry is never stored, only sent once to one consumer, so its codec
is chosen for that trip: LZ4 when the source entry was compressed (with any codec), none when
it was not. Measured on 100 × 1 KiB of text (``bench/binary_protocol_convert.py``; the
conversion itself costs ~1 ms): compressing the 105 KiB batch costs LZ4 0.3 ms (2.3× smaller),
ZSTD 0.75 ms (3.3×), ZLIB 3.7 ms (3.3×). Keeping ZLIB would quadruple the conversion's CPU and
keeping ZSTD almost double it, for fewer bytes on a link the broker's CPU saturates long
before; uncompressed would send 2.3× LZ4's bytes for 0.3 ms saved. Both protocols' clients
read LZ4, and SNAPPY (which ours lacks) becomes LZ4 the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minipulsar.binary_protocol import compression
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.batch import iter_messages
from minipulsar.binary_protocol.entry import parse_entry
from minipulsar.binary_protocol.frames import encode_headers_and_payload
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import batch as ours
from minipulsar.protocol import compression as our_compression

_COMPRESSED_BATCH = 0x95
"""First byte of our compressed batch shape, and only of it: a msgpack array of 5 (the plain
shape is an array of 4, :mod:`minipulsar.protocol.batch`)."""


def pulsar_entry_from_batch(our_payload: bytes) -> bytes:
    """Our msgpack batch as Pulsar headers and payload (checksummed, always a batch).

    Raises:
        MalformedCommandError: ``our_payload`` is not a batch, or holds no message.
    """
    publish_time_ms, producer_name, rows = ours.decode_batch_items(our_payload)
    if not rows:
        raise MalformedCommandError("a batch of no messages has no Pulsar form")
    if len(rows) == 1:
        return _lone_message(publish_time_ms, producer_name, rows[0], our_payload[0] == _COMPRESSED_BATCH)
    payload = _pulsar_batch_payload(rows)
    metadata = api.MessageMetadata(
        producer_name=producer_name,
        sequence_id=rows[0][0],
        highest_sequence_id=rows[-1][0],
        publish_time=publish_time_ms,
        num_messages_in_batch=len(rows),
        uncompressed_size=len(payload),
    )
    _set_first_keys(metadata, rows[0])
    if our_payload[0] == _COMPRESSED_BATCH:
        metadata.compression = api.LZ4
        payload = compression.compress(api.LZ4, payload)
    return encode_headers_and_payload(metadata, payload)


def batch_from_pulsar_entry(headers_and_payload: bytes) -> bytes:
    """Pulsar headers and payload as our msgpack batch (``encode_rows``).

    Raises:
        MalformedCommandError: unreadable, corrupt compression, or a checksum that does not
            match (the entry was damaged after it was verified on SEND).
    """
    entry = parse_entry(headers_and_payload)
    if entry.checksum_ok is False:
        raise MalformedCommandError("Pulsar entry fails its checksum")
    metadata = entry.metadata
    first_sequence_id = metadata.sequence_id
    rows = [
        _row(single, payload, first_sequence_id + index)
        for index, (single, payload) in enumerate(iter_messages(metadata, entry.payload))
    ]
    codec: our_compression.CompressionCodec = our_compression.LZ4
    if metadata.compression == api.NONE:
        codec = our_compression.NONE
    return ours.encode_rows(metadata.publish_time, _text(metadata.producer_name), rows, codec)


def _lone_message(publish_time_ms: int, producer_name: str, row: Sequence[Any], compressed: bool) -> bytes:
    """One message outside a batch: its fields on the entry's metadata."""
    single = _single_metadata(row)
    metadata = api.MessageMetadata(producer_name=producer_name, publish_time=publish_time_ms)
    for field, value in single.ListFields():
        if field.name == "properties":
            metadata.properties.extend(value)
        elif field.name != "payload_size":
            setattr(metadata, field.name, value)
    payload: bytes = row[1] or b""
    if compressed:
        metadata.compression = api.LZ4
        metadata.uncompressed_size = len(payload)
        payload = compression.compress(api.LZ4, payload)
    return encode_headers_and_payload(metadata, payload)


def _pulsar_batch_payload(rows: Sequence[Sequence[Any]]) -> bytes:
    """The uncompressed Pulsar batch of our rows (``batch.build_batch`` without an object
    per message: this is the dispatch path of a Pulsar consumer on a minipulsar topic)."""
    parts: list[bytes] = []
    pack_size = _pack_u32
    for row in rows:
        single = _single_metadata(row)
        serialized = single.SerializeToString()
        parts += (pack_size(len(serialized)), serialized, row[1] or b"")
    return b"".join(parts)


def _set_first_keys(metadata: api.MessageMetadata, first: Sequence[Any]) -> None:
    """The first message's key and ordering key on the entry too, as the official clients
    write a batch: Key_Shared routes a batch by them (``entry.sticky_key``); readers of the
    messages use each ``SingleMessageMetadata``'s own."""
    if first[2] is not None:
        metadata.partition_key = first[2]
    if len(first) > 5 and first[5] is not None:
        metadata.ordering_key = first[5].encode()


def _single_metadata(row: Sequence[Any]) -> api.SingleMessageMetadata:
    sequence_id, data, key, properties, event_time_ms = row[:5]
    single = api.SingleMessageMetadata(sequence_id=sequence_id, payload_size=0 if data is None else len(data))
    if data is None:
        single.null_value = True
    if key is not None:
        single.partition_key = key
    if len(row) > 5 and row[5] is not None:
        single.ordering_key = row[5].encode()
    if properties:
        add = single.properties.add
        for name, value in properties.items():
            add(key=name, value=value)
    if event_time_ms:
        single.event_time = event_time_ms
    return single


def _row(single: api.SingleMessageMetadata, payload: bytes, default_sequence_id: int) -> ours.Row:
    """Our batch's message fields (``(sequence_id, data, key, properties, event_time_ms
    (, ordering_key))``) of one Pulsar message."""
    sequence_id = single.sequence_id if single.HasField("sequence_id") else default_sequence_id
    data = None if single.null_value else payload
    key = _text(single.partition_key) if single.HasField("partition_key") else None
    properties = {_text(kv.key): _text(kv.value) for kv in single.properties} if len(single.properties) else None
    if single.HasField("ordering_key"):
        return (sequence_id, data, key, properties, single.event_time, _text(single.ordering_key))
    return (sequence_id, data, key, properties, single.event_time)


def _text(value: str | bytes) -> str:
    """A Pulsar string or bytes field as our text (the module docstring's UTF-8 rule)."""
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def _pack_u32(value: int) -> bytes:
    return value.to_bytes(4, "big")
