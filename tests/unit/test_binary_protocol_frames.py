"""Goal: PulsarFrameDecoder turns any split of a byte stream into the frames encoded into it,
refuses an oversized frame before buffering it, and survives a malformed command.

Method: encode commands (with and without payload), feed the stream whole, at every split
offset, byte by byte and through the BufferedProtocol pair; then feed forged frames.
"""

from __future__ import annotations

import random
import struct

import crc32c
import pytest

from minipulsar.binary_protocol import commands
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.frames import (
    MAGIC_CRC32C,
    PulsarFrame,
    PulsarFrameDecoder,
    encode_command,
    encode_headers_and_payload,
    encode_payload_command,
)
from minipulsar.errors import FrameTooLargeError, MalformedCommandError

T = api.BaseCommand
METADATA = api.MessageMetadata(producer_name="producer-1", sequence_id=5, publish_time=1_700_000_000_000)


def send_command(sequence_id: int) -> api.BaseCommand:
    return api.BaseCommand(type=T.SEND, send=api.CommandSend(producer_id=1, sequence_id=sequence_id))


def sample_stream() -> tuple[bytes, list[tuple[api.BaseCommand, bytes | None]]]:
    """A stream of five frames, two with payloads, and what each should decode to."""
    headers_and_payload = encode_headers_and_payload(METADATA, b"x" * 3000)
    expected: list[tuple[api.BaseCommand, bytes | None]] = [
        (commands.ping(), None),
        (send_command(5), headers_and_payload),
        (commands.success(42), None),
        (commands.message(3, 10, 11, redelivery_count=2), encode_headers_and_payload(METADATA, b"", checksum=False)),
        (commands.error(7, api.TopicNotFound, "no such topic"), None),
    ]
    parts: list[bytes] = []
    for command, payload in expected:
        if payload is None:
            parts.append(encode_command(command))
        else:
            header, body = encode_payload_command(command, payload)
            parts += (header, bytes(body))
    return b"".join(parts), expected


def drain_frames(decoder: PulsarFrameDecoder) -> list[PulsarFrame]:
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame)
    decoder.compact()
    return frames


def assert_decoded(frames: list[PulsarFrame], expected: list[tuple[api.BaseCommand, bytes | None]]) -> None:
    assert [(f.command, f.headers_and_payload) for f in frames] == expected


def test_a_stream_fed_whole_decodes_to_its_frames() -> None:
    stream, expected = sample_stream()
    decoder = PulsarFrameDecoder()
    decoder.feed(stream)
    assert_decoded(drain_frames(decoder), expected)
    assert decoder.buffered_bytes == 0


def test_every_split_offset_decodes_the_same() -> None:
    stream, expected = sample_stream()
    for split in range(len(stream) + 1):
        decoder = PulsarFrameDecoder()
        decoder.feed(stream[:split])
        frames = drain_frames(decoder)
        decoder.feed(stream[split:])
        assert_decoded(frames + drain_frames(decoder), expected)


def test_byte_at_a_time_decodes_the_same() -> None:
    stream, expected = sample_stream()
    decoder, frames = PulsarFrameDecoder(), []
    for index in range(len(stream)):
        decoder.feed(stream[index : index + 1])
        frames += drain_frames(decoder)
    assert_decoded(frames, expected)


def test_buffered_protocol_reads_decode_the_same() -> None:
    """get_buffer/buffer_updated, in random read sizes (seeded), like a transport's reads."""
    stream, expected = sample_stream()
    rng = random.Random(23)
    decoder, frames, offset = PulsarFrameDecoder(), [], 0
    while offset < len(stream):
        buffer = decoder.get_buffer(-1)
        size = min(len(buffer), rng.randint(1, 700), len(stream) - offset)
        buffer[:size] = stream[offset : offset + size]
        decoder.buffer_updated(size)
        offset += size
        frames += drain_frames(decoder)
    assert_decoded(frames, expected)


def test_a_command_outlives_the_buffer_it_was_parsed_from() -> None:
    """protobuf copies out of the receive buffer: compaction never changes a parsed frame."""
    connect = api.BaseCommand(type=T.CONNECT, connect=api.CommandConnect(client_version="Pulsar-CPP-v4.2.0"))
    decoder = PulsarFrameDecoder()
    decoder.feed(encode_command(connect) + b"\xff" * 10)
    frame = decoder.next_frame()
    decoder.compact()
    decoder.feed(b"\xee" * 70_000)  # overwrites and grows the buffer
    assert frame is not None and frame.command.connect.client_version == "Pulsar-CPP-v4.2.0"


def test_a_2_gib_total_size_is_refused_before_its_body_is_buffered() -> None:
    decoder = PulsarFrameDecoder(max_frame_size=5 << 20)
    decoder.feed(struct.pack(">II", 2**31, 10))
    with pytest.raises(FrameTooLargeError):
        decoder.next_frame()
    assert len(decoder.get_buffer(-1)) < 1 << 20  # never grown for the refused frame


def test_garbage_command_then_a_good_frame() -> None:
    """The bad frame is consumed before it is parsed: the next one reads as usual."""
    garbage = b"\xff\xff\xff\xff\x0f"
    decoder = PulsarFrameDecoder()
    decoder.feed(struct.pack(">II", 4 + len(garbage), len(garbage)) + garbage + encode_command(commands.pong()))
    with pytest.raises(MalformedCommandError, match="does not parse"):
        decoder.next_frame()
    frame = decoder.next_frame()
    assert frame is not None and frame.command.type == T.PONG


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"", "no commandSize"),
        (b"\x00\x00", "no commandSize"),
        (struct.pack(">I", 9) + b"\x08\x12", "exceeds"),
        (struct.pack(">I", 0), "misses required fields: type"),
        (struct.pack(">I", 2) + b"\x08\x63", "misses required fields: type"),  # type 99: not in the enum
        (struct.pack(">I", 4) + b"\x08\x07\x3a\x00", "send_receipt.producer_id"),  # SEND_RECEIPT, empty
    ],
)
def test_malformed_frames_are_consumed_and_refused(body: bytes, match: str) -> None:
    decoder = PulsarFrameDecoder()
    decoder.feed(struct.pack(">I", len(body)) + body + encode_command(commands.ping()))
    with pytest.raises(MalformedCommandError, match=match):
        decoder.next_frame()
    frame = decoder.next_frame()
    assert frame is not None and frame.command.type == T.PING


def test_a_command_this_build_does_not_model_still_parses() -> None:
    """Type SCALABLE_TOPIC_LOOKUP (70) with its body as field 70: kept as an unknown field."""
    command_bytes = b"\x08\x46" + b"\xb2\x04\x02\x08\x01"
    decoder = PulsarFrameDecoder()
    decoder.feed(struct.pack(">II", 4 + len(command_bytes), len(command_bytes)) + command_bytes)
    frame = decoder.next_frame()
    assert frame is not None and frame.command.type == T.SCALABLE_TOPIC_LOOKUP
    assert commands.body(frame.command) is None


def test_encode_command_layout() -> None:
    command = commands.ping()
    encoded = encode_command(command)
    command_bytes = command.SerializeToString()
    assert encoded == struct.pack(">II", 4 + len(command_bytes), len(command_bytes)) + command_bytes


def test_encode_payload_command_leaves_the_payload_uncopied() -> None:
    payload = memoryview(bytearray(b"entry bytes"))
    header, body = encode_payload_command(send_command(1), payload)
    assert body is payload
    (total_size,) = struct.unpack_from(">I", header)
    assert total_size == len(header) - 4 + len(payload)


def test_headers_and_payload_checksum_covers_metadata_size_to_the_end() -> None:
    with_checksum = encode_headers_and_payload(METADATA, b"payload")
    without = encode_headers_and_payload(METADATA, b"payload", checksum=False)
    magic, checksum = struct.unpack_from(">HI", with_checksum)
    assert magic == MAGIC_CRC32C
    assert with_checksum[6:] == without
    assert checksum == crc32c.crc32c(without)
    (metadata_size,) = struct.unpack_from(">I", without)
    assert api.MessageMetadata.FromString(without[4 : 4 + metadata_size]) == METADATA
    assert without[4 + metadata_size :] == b"payload"


def test_fuzzed_streams_raise_only_protocol_errors() -> None:
    """Random bytes and mutated frames: only MalformedCommandError / FrameTooLargeError."""
    stream, _ = sample_stream()
    rng = random.Random(2023)
    for _ in range(300):
        mutated = bytearray(stream)
        for _ in range(rng.randint(1, 8)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        decoder = PulsarFrameDecoder(max_frame_size=1 << 16)
        decoder.feed(bytes(mutated))
        for _ in range(20):
            try:
                if decoder.next_frame() is None:
                    break
            except MalformedCommandError:
                continue
            except FrameTooLargeError:
                break
