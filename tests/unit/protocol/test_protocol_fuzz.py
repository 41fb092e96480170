"""Goal: no input makes the decoder raise anything but a ProtocolError; a bad body costs one
frame, a bad length costs the connection, and an oversized length is refused on its header."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipulsar.errors import FrameTooLargeError, MalformedCommandError, ProtocolError
from minipulsar.protocol.codec import CommandDecoder, decode_body, encode_bytes
from minipulsar.protocol.commands import Flow, Ping, Send
from minipulsar.protocol.frames import LENGTH
from minipulsar.protocol.schema import REGISTRY, Command
from tests.support.protocol_strategies import any_command, framed, msgpack_values

FUZZ = settings(max_examples=150, deadline=None)
SMALL_MAX_FRAME_SIZE = 4096


def wire_maps() -> st.SearchStrategy[dict[str, Any]]:
    """Maps that look like commands: a real or bogus ``t``, real field names, any values."""
    field_names = sorted({spec.name for cls in REGISTRY.values() for spec in cls._FIELDS})
    keys = st.sampled_from(["t", "id", *field_names]) | st.text(max_size=8)
    types = st.sampled_from(sorted(REGISTRY)) | msgpack_values
    return st.fixed_dictionaries({"t": types}, optional={"id": msgpack_values}).flatmap(
        lambda head: st.dictionaries(keys, msgpack_values, max_size=6).map(lambda rest: {**rest, **head})
    )


def frames() -> st.SearchStrategy[bytes]:
    """Valid frames, framed garbage, framed command-like maps, and raw garbage."""
    return st.one_of(
        any_command(payload_bytes_max=64).map(encode_bytes),
        st.binary(max_size=64).map(framed),
        wire_maps().map(lambda wire: framed(msgpack.packb(wire, use_bin_type=True))),
        msgpack_values.map(lambda value: framed(msgpack.packb(value, use_bin_type=True))),
        st.binary(max_size=16),
    )


def drain(decoder: CommandDecoder) -> list[Command | MalformedCommandError]:
    """Everything the decoder yields until it needs bytes; stops at a fatal FrameTooLargeError."""
    out: list[Command | MalformedCommandError] = []
    while True:
        try:
            command = decoder.next_command()
        except MalformedCommandError as error:
            out.append(error)
            continue
        if command is None:
            break
        out.append(command)
    decoder.compact()
    return out


@FUZZ
@given(data=st.binary(max_size=2048), chunk=st.integers(1, 64))
def test_arbitrary_bytes_raise_only_protocol_errors(data: bytes, chunk: int) -> None:
    decoder = CommandDecoder(SMALL_MAX_FRAME_SIZE)
    try:
        for start in range(0, len(data), chunk):
            decoder.feed(data[start : start + chunk])
            drain(decoder)
    except FrameTooLargeError:
        pass


@FUZZ
@given(parts=st.lists(frames(), max_size=12), chunk=st.integers(1, 97))
def test_mixed_valid_and_invalid_frames_raise_only_protocol_errors(parts: list[bytes], chunk: int) -> None:
    """Method: streams mixing valid frames with framed garbage and command-like maps with
    wrong/missing fields, fed in chunks; only ProtocolError subclasses may escape."""
    data = b"".join(parts)
    decoder = CommandDecoder(SMALL_MAX_FRAME_SIZE)
    try:
        for start in range(0, len(data), chunk):
            decoder.feed(data[start : start + chunk])
            for item in drain(decoder):
                assert isinstance(item, (Command, MalformedCommandError))
    except FrameTooLargeError:
        pass


@FUZZ
@given(body=st.binary(max_size=256) | wire_maps().map(lambda w: msgpack.packb(w, use_bin_type=True)))
def test_decode_body_raises_only_invalid_command(body: bytes) -> None:
    try:
        decode_body(body)
    except MalformedCommandError:
        pass


@settings(max_examples=60, deadline=None)
@given(
    bad=st.binary(max_size=64) | wire_maps().map(lambda w: msgpack.packb(w, use_bin_type=True)),
    good=any_command(payload_bytes_max=64),
)
def test_decoder_continues_with_the_next_frame_after_an_invalid_one(bad: bytes, good: Command) -> None:
    decoder = CommandDecoder()
    decoder.feed(framed(bad) + encode_bytes(good) + encode_bytes(Ping()))
    out = drain(decoder)
    assert out[-2:] == [good, Ping()]
    assert len(out) == 3  # the bad frame yields exactly one item: a command or an error


@pytest.mark.parametrize(
    "body",
    [
        b"\xc1",
        b"\x93\x01\x02\x03",
        b"\xa3abc",
        b"\x81\xa1t\x90",
        b"\x82\xa1t\xa4FLOW\xa2id\x05",
        b"\xff" * 10,
        b"\x91" * 100_000,
        b"\xdd\xff\xff\xff\xff",
        b"\xdf\xff\xff\xff\xff",
        b"\x81\xa1t\xc4\x01x",
    ],
    ids=[
        "never-used-byte",
        "array",
        "string",
        "list-as-type",
        "missing-fields",
        "garbage",
        "deep-nesting",
        "huge-array-length",
        "huge-map-length",
        "bin-as-type",
    ],
)
def test_known_bad_bodies_are_invalid_commands(body: bytes) -> None:
    decoder = CommandDecoder()
    decoder.feed(framed(body) + encode_bytes(Flow(consumer_id=1, permits=2)))
    with pytest.raises(MalformedCommandError):
        decoder.next_command()
    assert decoder.next_command() == Flow(consumer_id=1, permits=2)


def test_unhashable_command_type_is_an_invalid_command_with_its_request_id() -> None:
    """``t`` holding a list or map (unhashable: no command lookup) is a malformed command, not a
    TypeError."""
    for bogus in ([1], {"a": 1}):
        with pytest.raises(MalformedCommandError) as caught:
            decode_body(msgpack.packb({"t": bogus, "id": 9}))
        assert caught.value.request_id == 9


def test_oversized_length_is_refused_on_its_four_header_bytes() -> None:
    """Method: feed a prefix of max+1 one byte at a time; the 4th byte raises, no body needed."""
    decoder = CommandDecoder(max_frame_size=100)
    header = LENGTH.pack(101)
    for byte in header[:3]:
        decoder.feed(bytes([byte]))
        assert decoder.next_command() is None
    decoder.feed(header[3:])
    with pytest.raises(FrameTooLargeError):
        decoder.next_command()
    with pytest.raises(FrameTooLargeError):  # fatal: the stream cannot be re-synchronised
        decoder.next_command()


def test_two_gib_length_prefix_is_refused_without_its_body() -> None:
    decoder = CommandDecoder()
    decoder.feed(encode_bytes(Ping()) + LENGTH.pack(2**31))
    assert decoder.next_command() == Ping()
    with pytest.raises(FrameTooLargeError) as caught:
        decoder.next_command()
    assert isinstance(caught.value, ProtocolError)
    assert str(2**31) in str(caught.value)


def test_frame_of_exactly_max_frame_size_is_accepted() -> None:
    send = Send(producer_id=1, sequence_id=2, payload=b"")
    overhead = len(encode_bytes(send)) - 4  # an empty bin8 already has its length byte
    send = Send(producer_id=1, sequence_id=2, payload=b"x" * (200 - overhead))
    assert len(encode_bytes(send)) - 4 == 200
    decoder = CommandDecoder(max_frame_size=200)
    decoder.feed(encode_bytes(send))
    assert decoder.next_command() == send


def test_unknown_command_text_is_bounded() -> None:
    """A megabyte ``t`` must not become a megabyte log line and ERROR message."""
    with pytest.raises(MalformedCommandError) as caught:
        decode_body(msgpack.packb({"t": "X" * 1_000_000, "id": 1}))
    assert len(str(caught.value)) < 200
