"""Goal: sniff tells a minipulsar connection from a Pulsar one by its first five bytes, waits
for them, refuses a stream that is neither, and leaves a length no frame may have to
minipulsar's codec (which refuses it as before the broker spoke Pulsar).

Method: the first bytes of real frames of both protocols, and forged prefixes.
"""

from __future__ import annotations

import msgpack
import pytest

from minipulsar.binary_protocol import commands
from minipulsar.binary_protocol.detect import sniff
from minipulsar.binary_protocol.frames import encode_command
from minipulsar.errors import MalformedCommandError

MAX_FRAME = 5 * 1024 * 1024


def minipulsar_frame(body: dict[str, object]) -> bytes:
    packed = msgpack.packb(body)
    return len(packed).to_bytes(4, "big") + packed


@pytest.mark.parametrize("size", [1, 15, 16, 70_000])  # fixmap, map 16, map 32
def test_a_minipulsar_frame_is_recognised(size: int) -> None:
    assert sniff(minipulsar_frame({f"k{i}": i for i in range(size)}), MAX_FRAME) == "minipulsar"


def test_a_pulsar_frame_is_recognised() -> None:
    frame = encode_command(commands.ping())
    assert sniff(frame, MAX_FRAME) == "pulsar"
    assert sniff(memoryview(bytearray(frame)), MAX_FRAME) == "pulsar"


@pytest.mark.parametrize("prefix", [b"", b"\x00", b"\x00\x00\x00\x05"])
def test_fewer_than_five_bytes_say_nothing_yet(prefix: bytes) -> None:
    assert sniff(prefix, MAX_FRAME) is None


@pytest.mark.parametrize("prefix", [b"GET / HTTP/1.1\r\n", b"\x16\x03\x01\x02\x31\x01", b"\x00\x00\x00\x10\x94"])
def test_anything_else_is_refused_naming_its_bytes(prefix: bytes) -> None:
    with pytest.raises(MalformedCommandError, match=prefix[:5].hex(" ")):
        sniff(prefix, MAX_FRAME)


@pytest.mark.parametrize(
    "prefix",
    [b"\x00\x00\x00\x00\x00", b"\x00\x00\x00\x05\x00\x00\x00\x00\x01", b"\x80\x00\x00\x00\x00"],
    ids=["empty", "too short", "2 GiB"],
)
def test_a_length_no_frame_may_have_is_left_to_minipulsar(prefix: bytes) -> None:
    assert sniff(prefix, MAX_FRAME) == "minipulsar"
