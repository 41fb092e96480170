"""Goal: every command survives encode → CommandDecoder unchanged, alone and in a stream of
frames however the stream is cut into reads (h11-style byte-at-a-time tests)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipulsar.protocol.codec import CommandDecoder, decode_body, encode, encode_bytes
from minipulsar.protocol.frames import LENGTH
from minipulsar.protocol.schema import Command
from tests.support.protocol_strategies import COMMAND_CLASSES, any_command, commands_of

ROUND_TRIP = settings(max_examples=15, deadline=None)
STREAMS = settings(max_examples=15, deadline=None)


def decode_all(decoder: CommandDecoder) -> list[Command]:
    commands = []
    while (command := decoder.next_command()) is not None:
        commands.append(command)
    decoder.compact()
    return commands


@pytest.mark.parametrize("cls", COMMAND_CLASSES, ids=lambda cls: cls.TYPE)
@ROUND_TRIP
@given(data=st.data())
def test_every_command_round_trips(cls: type[Command], data: st.DataObject) -> None:
    """Method: a generated instance of each registered class, encoded and decoded, equals itself."""
    command = data.draw(commands_of(cls))
    header, body = encode(command)
    assert LENGTH.unpack(header) == (len(body),)
    decoder = CommandDecoder()
    decoder.feed(header + body)
    decoded = decode_all(decoder)
    assert decoded == [command]
    assert type(decoded[0]) is cls
    assert decode_body(body) == command


def test_registry_holds_every_command_of_design() -> None:
    """The docs/design.md §3 command set is registered under its wire names."""
    names = {cls.TYPE for cls in COMMAND_CLASSES}
    for expected in (
        "CONNECT",
        "CONNECTED",
        "LOOKUP",
        "LOOKUP_RESPONSE",
        "PARTITIONED_METADATA",
        "PRODUCER",
        "SEND",
        "SEND_RECEIPT",
        "SUBSCRIBE",
        "FLOW",
        "MESSAGE",
        "ACK",
        "REDELIVER_UNACKED",
        "SEEK",
        "GET_LAST_MESSAGE_ID",
        "CLOSE_PRODUCER",
        "CLOSE_CONSUMER",
        "PING",
        "PONG",
        "ERROR",
        "ADD_ENTRY",
        "READ_ENTRY",
        "READ_LAC",
        "BOOKIE_INFO",
    ):
        assert expected in names


@STREAMS
@given(commands=st.lists(any_command(payload_bytes_max=48), min_size=8, max_size=30))
def test_stream_decodes_the_same_whole_split_anywhere_and_byte_by_byte(commands: list[Command]) -> None:
    """Method: one stream of many frames, fed (a) whole, (b) in two reads split at every
    offset, (c) one byte per read; every way yields the same commands in order."""
    stream = b"".join(encode_bytes(command) for command in commands)

    whole = CommandDecoder()
    whole.feed(stream)
    assert decode_all(whole) == commands

    for offset in range(len(stream) + 1):
        decoder = CommandDecoder()
        decoder.feed(stream[:offset])
        first = decode_all(decoder)
        decoder.feed(stream[offset:])
        assert first + decode_all(decoder) == commands, f"split at {offset}"

    decoder = CommandDecoder()
    seen: list[Command] = []
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
        seen += decode_all(decoder)
    assert seen == commands
    assert decoder.next_command() is None


@STREAMS
@given(commands=st.lists(any_command(), min_size=1, max_size=10), cuts=st.lists(st.integers(0, 1 << 16)))
def test_stream_with_large_payloads_decodes_across_random_reads(commands: list[Command], cuts: list[int]) -> None:
    """Method: payloads up to 4 KiB, the stream cut at random offsets (memoryview reads)."""
    stream = memoryview(b"".join(encode_bytes(command) for command in commands))
    offsets = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    decoder = CommandDecoder()
    seen: list[Command] = []
    for start, end in itertools.pairwise(offsets):
        decoder.feed(stream[start:end])
        seen += decode_all(decoder)
    assert seen == commands


def test_a_decoder_asked_for_a_bigger_pipeline_grows_to_it_and_keeps_it_between_reads() -> None:
    """Goal: a connection of big frames (a bookie's adds) reads 1 MiB at a time; others keep
    the default. Method: feed 64 KiB frames back to back through get_buffer, as the transport
    does, and look at the room each read is given."""
    from minipulsar.protocol.frames import PIPELINE_CAPACITY, FrameDecoder

    frame = LENGTH.pack(64 * 1024) + bytes(64 * 1024)
    for capacity in (PIPELINE_CAPACITY, 1024 * 1024):
        decoder = FrameDecoder(pipeline_capacity=capacity)
        stream = memoryview(frame * 40)
        largest = 0
        while stream:
            room = decoder.get_buffer(-1)
            largest = max(largest, len(room))
            size = min(len(room), len(stream))
            room[:size] = stream[:size]
            decoder.buffer_updated(size)
            stream = stream[size:]
            while decoder.next_span() is not None:
                pass
            decoder.compact()
        assert capacity - 64 * 1024 <= largest <= capacity, (capacity, largest)
