"""Goal: parse_entry reads a stored Pulsar entry — with or without checksum, behind broker
entry metadata or not — reports a bad checksum instead of raising, and refuses anything whose
sizes or metadata do not hold together; is_pulsar_entry tells it from our msgpack batches.

Method: entries built with encode_headers_and_payload, then corrupted byte by byte.
"""

from __future__ import annotations

import base64
import struct

import pytest

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.entry import (
    PulsarEntry,
    is_pulsar_entry,
    num_messages,
    parse_entry,
    parse_metadata,
    sticky_key,
    verify_checksum,
)
from minipulsar.binary_protocol.frames import MAGIC_BROKER_ENTRY_METADATA, encode_headers_and_payload
from minipulsar.entry_format import last_batch_index
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression
from minipulsar.protocol.batch import BatchMessage, encode_batch

ENTRY_METADATA = api.MessageMetadata(
    producer_name="standalone-0-1", sequence_id=17, publish_time=1_700_000_000_123, partition_key="user-9"
)
PAYLOAD = b"the message"


def with_broker_entry_metadata(entry: bytes) -> bytes:
    broker = api.BrokerEntryMetadata(broker_timestamp=1_700_000_000_200, index=41).SerializeToString()
    return struct.pack(">HI", MAGIC_BROKER_ENTRY_METADATA, len(broker)) + broker + entry


def test_a_checksummed_entry_parses() -> None:
    entry = parse_entry(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD))
    assert entry == PulsarEntry(ENTRY_METADATA, PAYLOAD, checksum_ok=True)


def test_an_entry_without_checksum_parses_with_checksum_ok_none() -> None:
    entry = parse_entry(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD, checksum=False))
    assert entry == PulsarEntry(ENTRY_METADATA, PAYLOAD, checksum_ok=None)


@pytest.mark.parametrize("offset", [2, 6, 12, -1])  # the crc, metadataSize's tail, metadata, payload
def test_a_flipped_byte_fails_the_checksum_without_raising(offset: int) -> None:
    data = bytearray(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD))
    data[offset] ^= 0x01
    try:
        entry = parse_entry(bytes(data))
    except MalformedCommandError:
        return  # the flip broke the metadata itself: refused, which is fine too
    assert entry.checksum_ok is False
    assert verify_checksum(bytes(data)) is False


def test_broker_entry_metadata_is_skipped() -> None:
    data = with_broker_entry_metadata(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD))
    assert is_pulsar_entry(data)
    assert parse_entry(data) == PulsarEntry(ENTRY_METADATA, PAYLOAD, checksum_ok=True)
    assert parse_metadata(data) == ENTRY_METADATA
    assert verify_checksum(data) is True


def test_parse_metadata_and_verify_checksum_read_memoryviews() -> None:
    data = memoryview(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD))
    assert parse_metadata(data) == ENTRY_METADATA
    assert verify_checksum(data) is True
    assert verify_checksum(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD, checksum=False)) is None


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "metadataSize"),
        (b"\x00\x00", "metadataSize"),
        (b"\x0e\x01\x00\x00", "inside its checksum"),
        (struct.pack(">I", 1000) + b"short", "overruns"),
        (struct.pack(">I", 3) + b"\xff\xff\xff", "does not parse"),
        (struct.pack(">I", 2) + b"\x10\x01", "misses producer_name"),
        (struct.pack(">HI", MAGIC_BROKER_ENTRY_METADATA, 99) + b"x", "broker entry metadata"),
    ],
)
def test_unreadable_entries_are_refused(data: bytes, match: str) -> None:
    with pytest.raises(MalformedCommandError, match=match):
        parse_entry(data)


def test_every_truncation_is_refused_or_fails_its_checksum() -> None:
    data = encode_headers_and_payload(ENTRY_METADATA, PAYLOAD)
    for end in range(len(data)):
        try:
            entry = parse_entry(data[:end])
        except MalformedCommandError:
            continue
        assert entry.checksum_ok is False, end


def test_is_pulsar_entry_tells_the_formats_apart() -> None:
    ours = [
        encode_batch(1, "p", [BatchMessage(0, b"x")]),
        encode_batch(1, "p", [BatchMessage(0, b"x" * 100)], compression.LZ4),
    ]
    assert [entry[0] for entry in ours] == [0x94, 0x95]
    assert not any(is_pulsar_entry(entry) for entry in ours)
    assert is_pulsar_entry(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD))
    assert is_pulsar_entry(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD, checksum=False))
    assert is_pulsar_entry(with_broker_entry_metadata(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD)))
    assert not is_pulsar_entry(b"")
    assert not is_pulsar_entry(b"\x0e\x03")


def test_num_messages_counts_a_batch_or_one() -> None:
    assert num_messages(ENTRY_METADATA) == 1
    assert num_messages(api.MessageMetadata(num_messages_in_batch=40)) == 40


def test_sticky_key_prefers_the_ordering_key_then_the_partition_key() -> None:
    assert sticky_key(ENTRY_METADATA) == b"user-9"
    assert sticky_key(api.MessageMetadata(partition_key="k", ordering_key=b"\x00o")) == b"\x00o"
    encoded = api.MessageMetadata(partition_key=base64.b64encode(b"\xff\x01").decode(), partition_key_b64_encoded=True)
    assert sticky_key(encoded) == b"\xff\x01"
    assert (
        sticky_key(api.MessageMetadata(partition_key="not base64!", partition_key_b64_encoded=True)) == b"not base64!"
    )
    assert sticky_key(api.MessageMetadata()) is None


def test_the_last_batch_index_is_what_an_official_consumer_numbers_the_last_message() -> None:
    batch_of_ten = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=10)
    ours = [BatchMessage(i, b"x") for i in range(3)]
    assert last_batch_index(encode_headers_and_payload(batch_of_ten, b"")) == 9
    assert last_batch_index(encode_headers_and_payload(ENTRY_METADATA, PAYLOAD)) == -1
    assert last_batch_index(encode_batch(1, "p", ours)) == 2
    assert last_batch_index(encode_batch(1, "p", ours[:1], compression.LZ4)) == -1  # converted: a lone message
    assert last_batch_index(b"\x00\x00\x00\x05junk") == -1
