"""An entry in either of the two formats a topic holds (docs/design.md §3.7 and §3.8).

A SEND's payload is stored as it came: minipulsar's msgpack batch from our client, Pulsar's
"headers and payload" (checksum, ``MessageMetadata``, then the messages) from an official
client. Nothing on the publish path converts: the broker reads the few fields it needs —
message count, publish time, producer name and sequence ids, the first key — from either
format, and an entry is converted only on its way to a consumer speaking the other protocol
(:func:`as_minipulsar_entry`, :func:`as_pulsar_entry`).

The formats never collide: ours is a msgpack array of 4 or 5 elements (first byte 0x94 or
0x95), Pulsar's starts with a checksum or broker-entry magic (0x0e) or a metadata size
(first byte 0x00).
"""

from __future__ import annotations

import logging

from minipulsar.binary_protocol import convert
from minipulsar.binary_protocol import entry as pulsar_entry
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import batch as own
from minipulsar.protocol.batch import Batch

log = logging.getLogger(__name__)

_OWN_HEADERS = (0x94, 0x95)
NONE_KEY = b"NONE_KEY"
"""Pulsar's key for messages without one (Key_Shared routes them all together)."""


def is_pulsar_entry(payload: bytes) -> bool:
    return bool(payload) and payload[0] not in _OWN_HEADERS


def num_messages(payload: bytes, default: int = 1) -> int:
    """The entry's message count (what it costs in permits); ``default`` if unreadable."""
    if not is_pulsar_entry(payload):
        return own.peek_num_messages(payload, default)
    try:
        return pulsar_entry.num_messages(pulsar_entry.parse_metadata(payload))
    except MalformedCommandError:
        return default


def is_intermediate_chunk(payload: bytes) -> bool:
    """A chunk of an official client's chunked message other than its last: every chunk
    carries the message's sequence id, and deduplication records that id only with the last
    (as Pulsar's broker does), so the others are not taken for resends of the first."""
    if not is_pulsar_entry(payload):
        return False
    try:
        metadata = pulsar_entry.parse_metadata(payload)
    except MalformedCommandError:
        return False
    return metadata.HasField("num_chunks_from_msg") and metadata.chunk_id < metadata.num_chunks_from_msg - 1


def last_batch_index(payload: bytes) -> int:
    """The index of the entry's last message as Pulsar's clients number it: ``count - 1`` for
    a batch, -1 for a message sent on its own (and for one of ours holding a single message,
    which :mod:`convert` writes as a message on its own), -1 if unreadable."""
    if not is_pulsar_entry(payload):
        count = own.peek_num_messages(payload, 0)
        return count - 1 if count > 1 else -1
    try:
        metadata = pulsar_entry.parse_metadata(payload)
    except MalformedCommandError:
        return -1
    return metadata.num_messages_in_batch - 1 if metadata.HasField("num_messages_in_batch") else -1


def publish_time_ms(payload: bytes) -> int | None:
    """When the entry's producer published it (None if unreadable)."""
    if not is_pulsar_entry(payload):
        return own.peek_publish_time_ms(payload)
    try:
        publish_time: int = pulsar_entry.parse_metadata(payload).publish_time
    except MalformedCommandError:
        return None
    return publish_time


def checksum_ok(payload: bytes) -> bool:
    """False only for a Pulsar entry whose CRC32C does not match (ours carry none: TCP's and
    the bookies' digests cover them)."""
    if not is_pulsar_entry(payload):
        return True
    try:
        return pulsar_entry.verify_checksum(payload) is not False
    except MalformedCommandError:
        return False


def decode_batch(payload: bytes) -> Batch:
    """Every message of the entry, in minipulsar's terms (deduplication replay, non-persistent
    Key_Shared routing).

    Raises:
        MalformedCommandError: not an entry of either format.
    """
    if not is_pulsar_entry(payload):
        return own.decode_batch(payload)
    return own.decode_batch(convert.batch_from_pulsar_entry(payload))


def sticky_key(payload: bytes) -> bytes:
    """The key Key_Shared routes the entry by: its ordering key, else its key (``NONE_KEY`` when
    it has neither or cannot be read), as Pulsar's ``peekStickyKey``. For a batch that is its
    first message's (Pulsar's clients put it on the batch's metadata, and so do we)."""
    if not is_pulsar_entry(payload):
        return own.peek_sticky_key(payload) or NONE_KEY
    try:
        return pulsar_entry.sticky_key(pulsar_entry.parse_metadata(payload)) or NONE_KEY
    except MalformedCommandError:
        return NONE_KEY


def as_minipulsar_entry(payload: bytes) -> bytes:
    """The entry as our client reads it (a Pulsar entry converted; ours as it is)."""
    if not is_pulsar_entry(payload):
        return payload
    try:
        return convert.batch_from_pulsar_entry(payload)
    except MalformedCommandError as error:
        log.warning("an entry stored by an official client cannot be read: %s; sent as it is", error)
        return payload


def as_pulsar_entry(payload: bytes) -> bytes:
    """The entry as an official client reads it (ours converted; a Pulsar entry as it is)."""
    if is_pulsar_entry(payload):
        return payload
    try:
        return convert.pulsar_entry_from_batch(payload)
    except MalformedCommandError as error:
        log.warning("an entry stored by minipulsar's client cannot be read: %s; sent as it is", error)
        return payload
