"""Goal: the receive path's two shortcuts read and write what the general codec does — a
MESSAGE frame from :func:`encode_message` (header apart from the payload) decodes to the same
command as :func:`encode`'s, and :func:`decode_batch_items` yields the fields
:func:`decode_batch` does, refusing what it refuses.

Method: both paths on the same values, ids at the edges of int64 and beyond, payloads around
msgpack's bin 8/16/32 limits, plain and compressed batches.
"""

from __future__ import annotations

import msgpack
import pytest

from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression
from minipulsar.protocol.batch import BatchMessage, decode_batch, decode_batch_items, encode_batch
from minipulsar.protocol.codec import CommandDecoder, decode_body, encode_bytes, encode_message
from minipulsar.protocol.commands import Message

INT64_MAX = (1 << 63) - 1


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65_535, 65_536, 200_000])
@pytest.mark.parametrize("ids", [(1, 2, 3, 0), (INT64_MAX, INT64_MAX, 0, 7), ((1 << 64) - 1, 1, 1, 1)])
def test_a_message_frame_in_two_parts_decodes_to_the_codec_command(size: int, ids: tuple[int, ...]) -> None:
    consumer_id, ledger_id, entry_id, redelivery_count = ids
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    header, body = encode_message(consumer_id, ledger_id, entry_id, payload, redelivery_count)
    frame = header + body
    expected = Message(
        consumer_id=consumer_id,
        ledger_id=ledger_id,
        entry_id=entry_id,
        payload=payload,
        redelivery_count=redelivery_count,
    )
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_body(frame[4:]) == expected == decode_body(encode_bytes(expected)[4:])
    decoder = CommandDecoder()
    decoder.feed(frame + encode_bytes(expected))
    assert [decoder.next_command(), decoder.next_command(), decoder.next_command()] == [expected, expected, None]


@pytest.mark.parametrize("codec", [compression.NONE, compression.LZ4, compression.ZLIB])
def test_batch_items_are_the_batch_messages_fields(codec: compression.CompressionCodec) -> None:
    messages = [
        BatchMessage(0, b"a" * 100, "k", {"p": "v"}, 5),
        BatchMessage(1, None),
        BatchMessage(2, b"c", ordering_key="o"),
    ]
    payload = encode_batch(1234, "prod", messages, codec)
    publish_ms, producer, items = decode_batch_items(payload)
    batch = decode_batch(payload)
    assert (publish_ms, producer) == (batch.publish_time_ms, batch.producer_name) == (1234, "prod")
    assert [BatchMessage(*item) for item in items] == batch.messages == messages


@pytest.mark.parametrize(
    "payload",
    [
        msgpack.packb([2, 0, "p", [[0, b"x", None, None, 0]]]),  # says 2, holds 1
        msgpack.packb([1, 0, "p", [[0, b"x"]]]),  # a message of 2 fields
        msgpack.packb([1, 0, "p", [5]]),  # a message that is not an array
        b"\xc1",
    ],
)
def test_batch_items_refuse_what_is_not_a_batch(payload: bytes) -> None:
    with pytest.raises(MalformedCommandError):
        decode_batch_items(payload)
