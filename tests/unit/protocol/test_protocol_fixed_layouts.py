"""Frames the hot paths pack by hand (ADD_ENTRY and SEND with their payloads sent as separate
buffers, SEND_RECEIPT) decode to the very command the codec would have sent, at the edges of int64 and
beyond (the general path); the decoder's short cut for a fixed-layout ADD_ENTRY_RESPONSE gives
the command msgpack would have, and so do its short cuts for ADD_ENTRY and SEND."""

from __future__ import annotations

import pytest

from minipulsar.errors import MalformedCommandError
from minipulsar.protocol.codec import (
    CommandDecoder,
    decode_body,
    encode,
    encode_add_entry,
    encode_add_entry_response,
    encode_bytes,
    encode_parts,
    encode_send,
    encode_send_receipt,
)
from minipulsar.protocol.commands import AddEntry, AddEntryResponse, Ping, Send, SendReceipt

INT64_MAX = (1 << 63) - 1
EDGES = [0, 1, -1, INT64_MAX, -(1 << 63), 1 << 63, (1 << 64) - 1]


@pytest.mark.parametrize("value", EDGES)
@pytest.mark.parametrize("recovery", [False, True])
def test_an_add_entry_prefix_and_its_payload_decode_to_the_codec_command(value: int, recovery: bool) -> None:
    head, payload = b"h" * 36, bytes(range(256)) * 4
    prefix = encode_add_entry(value, 7, value, value, recovery, b"k" * 20, head, payload)
    frame = prefix + payload
    expected = AddEntry(
        id=value,
        ledger_id=7,
        entry_id=value,
        payload=head + payload,
        lac=value,
        recovery=recovery,
        master_key=b"k" * 20,
    )
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_body(frame[4:]) == expected


@pytest.mark.parametrize("master_key", [b"", b"k" * 20, b"k" * 255, b"k" * 256])
@pytest.mark.parametrize("head", [b"", b"h" * 52])
def test_an_add_entry_of_any_key_and_head_size_decodes(master_key: bytes, head: bytes) -> None:
    payload = memoryview(b"payload")
    frame = encode_add_entry(1, 2, 3, -1, False, master_key, head, payload) + payload
    command = decode_body(frame[4:])
    assert command == AddEntry(id=1, ledger_id=2, entry_id=3, payload=head + b"payload", master_key=master_key)


@pytest.mark.parametrize("value", EDGES)
def test_a_send_receipt_frame_decodes_to_the_codec_command(value: int) -> None:
    frame = encode_send_receipt(value, value, 3, value)
    expected = SendReceipt(producer_id=value, sequence_id=value, ledger_id=3, entry_id=value)
    assert decode_body(frame[4:]) == expected


@pytest.mark.parametrize("value", EDGES)
def test_the_decoder_reads_add_responses_of_either_encoding_alike(value: int) -> None:
    expected = AddEntryResponse(id=value, ledger_id=5, entry_id=value)
    decoder = CommandDecoder()
    for frame in (encode_add_entry_response(value, 5, value), encode_bytes(expected)):
        decoder.feed(frame)
        assert decoder.next_command() == expected
        assert decoder.next_command() is None


def test_a_frame_of_the_add_response_size_with_other_keys_goes_through_msgpack() -> None:
    frame = bytearray(encode_add_entry_response(1, 2, 3))
    frame[frame.index(b"ledger_id")] = ord("L")  # same size, another key: not the fixed layout
    decoder = CommandDecoder()
    decoder.feed(bytes(frame))
    with pytest.raises(MalformedCommandError, match="ledger_id"):
        decoder.next_command()


@pytest.mark.parametrize("value", EDGES)
@pytest.mark.parametrize("master_key", [b"", b"k" * 20, b"k" * 256])
def test_the_decoder_reads_add_entries_of_either_encoding_alike(value: int, master_key: bytes) -> None:
    head, payload = b"h" * 36, b"p" * 100
    expected = AddEntry(
        id=value, ledger_id=1, entry_id=value, payload=head + payload, lac=value, recovery=True, master_key=master_key
    )
    fixed = encode_add_entry(value, 1, value, value, True, master_key, head, payload) + payload
    decoder = CommandDecoder()
    for frame in (fixed, encode_bytes(expected)):
        for i in range(len(frame)):  # byte by byte: the short cut only ever sees whole frames
            decoder.feed(frame[i : i + 1])
            command = decoder.next_command()
            assert command is None or (i == len(frame) - 1 and command == expected)
        decoder.compact()


def test_an_add_entry_whose_payload_length_disagrees_with_its_frame_goes_through_msgpack() -> None:
    frame = bytearray(encode_add_entry(1, 2, 3, -1, False, b"", b"", b"abc") + b"abc")
    frame[len(frame) - 3 - 1] = 4  # the bin32 length (its last byte) says 4 bytes; the frame holds 3
    decoder = CommandDecoder()
    decoder.feed(bytes(frame))
    with pytest.raises(MalformedCommandError):
        decoder.next_command()


@pytest.mark.parametrize("value", EDGES)
@pytest.mark.parametrize("payload", [b"", b"p", bytes(range(256)) * 4])
def test_the_decoder_reads_sends_of_either_encoding_alike(value: int, payload: bytes) -> None:
    expected = Send(producer_id=value, sequence_id=value, payload=payload, num_messages=value, highest_sequence_id=-1)
    header, body = encode_send(expected)
    assert decode_body((header + body)[4:]) == expected
    decoder = CommandDecoder()
    for frame in (header + body, encode_bytes(expected)):
        for i in range(len(frame)):  # byte by byte: the short cut only ever sees whole frames
            decoder.feed(frame[i : i + 1])
            command = decoder.next_command()
            assert command is None or (i == len(frame) - 1 and command == expected)
        decoder.compact()


def test_encode_parts_packs_a_send_by_hand_and_anything_else_as_encode() -> None:
    send = Send(producer_id=1, sequence_id=2, payload=b"data")
    header, body = encode_parts(send)
    assert body is send.payload  # the payload goes to the socket uncopied
    assert decode_body((header + body)[4:]) == send
    assert encode_parts(Ping()) == encode(Ping())


def test_a_send_whose_payload_length_disagrees_with_its_frame_goes_through_msgpack() -> None:
    header, body = encode_send(Send(producer_id=1, sequence_id=2, payload=b"abc"))
    frame = bytearray(header + body)
    frame[len(frame) - 3 - 1] = 4  # the bin32 length (its last byte) says 4 bytes; the frame holds 3
    decoder = CommandDecoder()
    decoder.feed(bytes(frame))
    with pytest.raises(MalformedCommandError):
        decoder.next_command()


def test_a_send_with_other_keys_goes_through_msgpack() -> None:
    header, body = encode_send(Send(producer_id=1, sequence_id=2, payload=b"abc"))
    frame = bytearray(header + body)
    frame[frame.index(b"producer_id")] = ord("P")  # same size, another key: not the fixed layout
    decoder = CommandDecoder()
    decoder.feed(bytes(frame))
    with pytest.raises(MalformedCommandError, match="producer_id"):
        decoder.next_command()
