"""Goal: an entry converted to the other protocol's format and back is the entry it was —
every message's key, ordering key, properties, event time, null value and sequence id, the
batch's producer and publish time, and its codec — and the converted form is what the other
protocol's readers expect.

Method: batches with every field set (and unset) through every codec both ways; then the
edge cases of the mapping (no per-message sequence id, a lone message, SNAPPY, bytes that are
not UTF-8, a bad checksum).
"""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.batch import SingleMessage, build_batch, split_batch
from minipulsar.binary_protocol.compression import compress
from minipulsar.binary_protocol.convert import batch_from_pulsar_entry, pulsar_entry_from_batch
from minipulsar.binary_protocol.entry import parse_entry, sticky_key
from minipulsar.binary_protocol.frames import encode_headers_and_payload
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression as ours
from minipulsar.protocol.batch import Batch, BatchMessage, decode_batch, encode_batch

OUR_MESSAGES = [
    BatchMessage(100, b"first", "key-1", {"colour": "blue", "n": "1"}, 1_700_000_000_001, "ordering-\u00e9"),
    BatchMessage(101, None),  # a null value, no key, nothing else
    BatchMessage(102, b"", "", {}, 0, ""),  # empty but present: key "" and ordering key ""
    BatchMessage(103, b"x" * 2000, "key-1", None, 5),
]
ROUND_TRIPPED = [*OUR_MESSAGES[:2], replace(OUR_MESSAGES[2], properties=None), OUR_MESSAGES[3]]
"""Pulsar has no empty-versus-absent properties: ``{}`` comes back as ``None``."""


def pulsar_batch_entry(singles: list[SingleMessage], codec: int = api.NONE, **metadata_fields: object) -> bytes:
    payload = build_batch(singles)
    metadata = api.MessageMetadata(
        producer_name="pulsar-producer",
        sequence_id=500,
        publish_time=1_700_000_000_500,
        num_messages_in_batch=len(singles),
        compression=codec,  # type: ignore[arg-type]
        uncompressed_size=len(payload),
        **metadata_fields,  # type: ignore[arg-type]
    )
    return encode_headers_and_payload(metadata, compress(codec, payload))


def converted_codec(codec: str) -> str:
    """What a converted entry is compressed with: LZ4 if the source was compressed at all."""
    return "NONE" if codec == "NONE" else "LZ4"


@pytest.mark.parametrize("codec", ours.CODECS)
def test_our_batch_survives_a_round_trip_through_pulsars_format(codec: ours.CompressionCodec) -> None:
    our_entry = encode_batch(1_700_000_000_000, "our-producer", OUR_MESSAGES, codec)
    back = decode_batch(batch_from_pulsar_entry(pulsar_entry_from_batch(our_entry)))
    assert back == Batch(1_700_000_000_000, "our-producer", ROUND_TRIPPED, converted_codec(codec))  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", ours.CODECS)
def test_our_batch_in_pulsars_format_reads_as_the_official_clients_write(codec: ours.CompressionCodec) -> None:
    entry = parse_entry(pulsar_entry_from_batch(encode_batch(7, "our-producer", OUR_MESSAGES, codec)))
    metadata = entry.metadata
    assert entry.checksum_ok is True
    assert (metadata.producer_name, metadata.publish_time) == ("our-producer", 7)
    assert (metadata.sequence_id, metadata.highest_sequence_id) == (100, 103)
    assert metadata.num_messages_in_batch == 4
    assert api.CompressionType.Name(metadata.compression) == converted_codec(codec)
    assert (metadata.partition_key, metadata.ordering_key) == ("key-1", "ordering-\u00e9".encode())
    assert sticky_key(metadata) == "ordering-\u00e9".encode()
    singles = split_batch(metadata, entry.payload)
    assert [s.payload for s in singles] == [b"first", b"", b"", b"x" * 2000]
    first, null, empty, _ = (s.metadata for s in singles)
    assert [(p.key, p.value) for p in first.properties] == [("colour", "blue"), ("n", "1")]
    assert (first.event_time, first.sequence_id, first.null_value) == (1_700_000_000_001, 100, False)
    assert null.null_value and not null.HasField("partition_key") and not null.HasField("ordering_key")
    assert empty.HasField("partition_key") and empty.HasField("ordering_key") and not empty.HasField("event_time")


SINGLES = [
    SingleMessage(
        api.SingleMessageMetadata(
            properties=[api.KeyValue(key="a", value="b")],
            partition_key="pk",
            ordering_key="\u00fcber".encode(),
            event_time=33,
            sequence_id=500,
        ),
        b"one",
    ),
    SingleMessage(api.SingleMessageMetadata(sequence_id=501, null_value=True), b""),
    SingleMessage(api.SingleMessageMetadata(sequence_id=502), b"three"),
]


@pytest.mark.parametrize("codec", [api.NONE, api.LZ4, api.ZLIB, api.ZSTD, api.SNAPPY])
def test_a_pulsar_batch_survives_a_round_trip_through_ours(codec: int) -> None:
    original = pulsar_batch_entry(SINGLES, codec)
    back = parse_entry(pulsar_entry_from_batch(batch_from_pulsar_entry(original)))
    assert back.metadata.compression == (api.NONE if codec == api.NONE else api.LZ4)
    assert [(s.metadata, s.payload) for s in split_batch(back.metadata, back.payload)] == [
        (api.SingleMessageMetadata(**{**_fields(s.metadata), "payload_size": len(s.payload)}), s.payload)
        for s in SINGLES
    ]


def _fields(single: api.SingleMessageMetadata) -> dict[str, object]:
    return {field.name: value for field, value in single.ListFields()}


def test_a_pulsar_batch_in_our_format() -> None:
    batch = decode_batch(batch_from_pulsar_entry(pulsar_batch_entry(SINGLES, api.LZ4)))
    assert batch == Batch(
        1_700_000_000_500,
        "pulsar-producer",
        [
            BatchMessage(500, b"one", "pk", {"a": "b"}, 33, "\u00fcber"),
            BatchMessage(501, None),
            BatchMessage(502, b"three"),
        ],
        ours.LZ4,
    )


def test_messages_without_their_own_sequence_id_count_from_the_entrys() -> None:
    singles = [SingleMessage(api.SingleMessageMetadata(), b"a"), SingleMessage(api.SingleMessageMetadata(), b"b")]
    batch = decode_batch(batch_from_pulsar_entry(pulsar_batch_entry(singles)))
    assert [m.sequence_id for m in batch.messages] == [500, 501]


def test_a_lone_pulsar_message_becomes_a_batch_of_one() -> None:
    metadata = api.MessageMetadata(
        producer_name="lone", sequence_id=9, publish_time=4, partition_key="K", event_time=5, ordering_key=b"o"
    )
    batch = decode_batch(batch_from_pulsar_entry(encode_headers_and_payload(metadata, b"alone")))
    assert batch == Batch(4, "lone", [BatchMessage(9, b"alone", "K", None, 5, "o")])


@pytest.mark.parametrize("codec", [api.ZLIB, api.ZSTD, api.SNAPPY])
def test_a_compressed_pulsar_batch_becomes_our_lz4_batch(codec: int) -> None:
    """SNAPPY included, which ours lacks: see the module docstring of convert for why LZ4."""
    batch = decode_batch(batch_from_pulsar_entry(pulsar_batch_entry(SINGLES, codec)))
    assert batch.compression == ours.LZ4
    assert [m.data for m in batch.messages] == [b"one", None, b"three"]


def test_bytes_that_are_not_utf8_become_escapes() -> None:
    """Pulsar's ordering key is bytes, and upb hands a proto2 string that is not UTF-8 over
    as bytes: both read as UTF-8 with \\xNN escapes (our keys are msgpack strings)."""
    partition_key_not_utf8 = b"\x12\x02k\xff"  # SingleMessageMetadata.partition_key = b"k\xff"
    single = api.SingleMessageMetadata(ordering_key=b"o\xfe", sequence_id=1, payload_size=1)
    forged = single.SerializeToString() + partition_key_not_utf8
    payload = struct.pack(">I", len(forged)) + forged + b"p"
    metadata = api.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, num_messages_in_batch=1)
    (message,) = decode_batch(batch_from_pulsar_entry(encode_headers_and_payload(metadata, payload))).messages
    assert (message.key, message.ordering_key) == ("k\\xff", "o\\xfe")


def test_a_pulsar_entry_failing_its_checksum_is_refused() -> None:
    data = bytearray(pulsar_batch_entry(SINGLES))
    data[-1] ^= 0xFF
    with pytest.raises(MalformedCommandError, match="checksum"):
        batch_from_pulsar_entry(bytes(data))


@pytest.mark.parametrize("payload", [encode_batch(1, "p", []), b"\x93\x01\x02\x03", b"\xc1"])
def test_what_is_not_one_of_our_batches_is_refused(payload: bytes) -> None:
    with pytest.raises(MalformedCommandError):
        pulsar_entry_from_batch(payload)


def test_a_one_message_batch_becomes_a_lone_message_so_both_clients_give_it_one_id() -> None:
    """Our client numbers a one-message entry's message without a batch index, as Pulsar's
    clients do a message outside a batch: so the conversion writes no batch."""
    one = encode_batch(5, "p", [BatchMessage(3, b"x", "k", {"a": "b"}, 7, "o")])
    converted = parse_entry(pulsar_entry_from_batch(one))
    assert not converted.metadata.HasField("num_messages_in_batch")
    assert (converted.metadata.sequence_id, converted.metadata.partition_key) == (3, "k")
    assert converted.metadata.ordering_key == b"o" and converted.metadata.event_time == 7
    assert converted.payload == b"x"
    assert decode_batch(batch_from_pulsar_entry(pulsar_entry_from_batch(one))) == decode_batch(one)
