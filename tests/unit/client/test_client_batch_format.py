"""Goal: the entry payload format with compression (minipulsar.protocol.batch): compressed
batches round-trip with every codec; readers that do not inflate — the broker's message count,
publish time and Key_Shared key — read compressed entries as they read plain ones; plain
(original 4-element) entries are unchanged; corrupt or oversized compressed parts are refused."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipulsar.broker.topics.key_shared import NONE_KEY, sticky_key
from minipulsar.errors import MalformedCommandError
from minipulsar.protocol import compression
from minipulsar.protocol.batch import (
    Batch,
    BatchMessage,
    decode_batch,
    encode_batch,
    peek_num_messages,
    peek_publish_time_ms,
)

CODECS = [compression.LZ4, compression.ZSTD, compression.ZLIB]

messages = st.builds(
    BatchMessage,
    sequence_id=st.integers(0, 2**63 - 1),
    data=st.none() | st.binary(max_size=512),
    key=st.none() | st.text(max_size=12),
    properties=st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    event_time_ms=st.integers(0, 2**63 - 1),
    ordering_key=st.none() | st.text(max_size=8),
)


@settings(max_examples=40, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    publish_time_ms=st.integers(0, 2**63 - 1),
    batch=st.lists(messages, min_size=1, max_size=12),
)
def test_compressed_batches_round_trip(codec: str, publish_time_ms: int, batch: list[BatchMessage]) -> None:
    payload = encode_batch(publish_time_ms, "producer", batch, codec)
    assert decode_batch(payload) == Batch(publish_time_ms, "producer", batch, codec)
    assert peek_num_messages(payload) == len(batch)
    assert peek_publish_time_ms(payload) == publish_time_ms


@pytest.mark.parametrize("codec", CODECS)
def test_compression_shrinks_repetitive_batches(codec: str) -> None:
    batch = [BatchMessage(i, b"the same sentence again and again " * 10) for i in range(100)]
    assert len(encode_batch(1, "p", batch, codec)) < len(encode_batch(1, "p", batch)) / 5


@pytest.mark.parametrize("codec", [compression.NONE, *CODECS])
def test_the_key_shared_dispatcher_finds_the_first_key_without_inflating(codec: str) -> None:
    keyed = encode_batch(1, "p", [BatchMessage(0, b"a", "k1"), BatchMessage(1, b"b", "k2")], codec)
    unkeyed = encode_batch(1, "p", [BatchMessage(0, b"a"), BatchMessage(1, b"b", "k2")], codec)
    assert sticky_key(keyed) == b"k1"
    assert sticky_key(unkeyed) == NONE_KEY


@pytest.mark.parametrize("codec", [compression.NONE, *CODECS])
def test_the_first_messages_ordering_key_routes_before_its_key(codec: str) -> None:
    """Pulsar's order (``peekStickyKey``): the ordering key, else the key."""
    first, unordered = BatchMessage(0, b"a", "k1", ordering_key="o1"), BatchMessage(0, b"a", "k1")
    ordered = encode_batch(1, "p", [first, BatchMessage(1, b"b", "k2")], codec)
    ordered_only = encode_batch(1, "p", [BatchMessage(0, b"a", ordering_key="o1")], codec)
    second_ordered = encode_batch(1, "p", [unordered, BatchMessage(1, b"b", ordering_key="o2")], codec)
    assert (sticky_key(ordered), sticky_key(ordered_only), sticky_key(second_ordered)) == (b"o1", b"o1", b"k1")
    assert decode_batch(ordered).messages[0].ordering_key == "o1"


def test_plain_batches_keep_the_original_four_element_layout() -> None:
    payload = encode_batch(7, "p", [BatchMessage(3, b"x", "k", {"a": "b"}, 9)])
    assert msgpack.unpackb(payload) == [1, 7, "p", [[3, b"x", "k", {"a": "b"}, 9]]]
    old_writer = msgpack.packb([2, 7, "p", [[0, b"x", None, None, 0], [1, None, "k", None, 5]]])
    assert decode_batch(old_writer).messages == [BatchMessage(0, b"x"), BatchMessage(1, None, "k", None, 5)]


def test_an_ordering_key_adds_a_sixth_field_only_when_set() -> None:
    payload = encode_batch(1, "p", [BatchMessage(0, b"x"), BatchMessage(1, b"y", ordering_key="o")])
    raw = msgpack.unpackb(payload)[3]
    assert [len(m) for m in raw] == [5, 6]
    assert decode_batch(payload).messages[1].ordering_key == "o"


@pytest.mark.parametrize("codec", CODECS)
def test_corrupt_compressed_data_is_refused(codec: str) -> None:
    fields = msgpack.unpackb(encode_batch(1, "p", [BatchMessage(0, b"x" * 100)], codec))
    fields[4][2] = b"\x00garbage" + fields[4][2][8:]
    with pytest.raises(MalformedCommandError):
        decode_batch(msgpack.packb(fields))


def test_a_forged_uncompressed_size_is_refused_before_inflating() -> None:
    fields = msgpack.unpackb(encode_batch(1, "p", [BatchMessage(0, b"x")], compression.ZSTD))
    fields[4][1] = compression.UNCOMPRESSED_BYTES_MAX + 1
    with pytest.raises(MalformedCommandError, match="out of bounds"):
        decode_batch(msgpack.packb(fields))
    fields[4][1] = 5  # a size that does not match what the data inflates to
    with pytest.raises(MalformedCommandError):
        decode_batch(msgpack.packb(fields))


def test_unknown_and_unshipped_codecs_are_named() -> None:
    assert compression.check_codec("zstd") == compression.ZSTD
    with pytest.raises(ValueError, match="SNAPPY"):
        compression.check_codec("SNAPPY")
    with pytest.raises(ValueError, match="unknown compression"):
        compression.check_codec("brotli")
    fields = msgpack.unpackb(encode_batch(1, "p", [BatchMessage(0, b"x")], compression.LZ4))
    fields[4][0] = "BROTLI"
    with pytest.raises(MalformedCommandError, match="unknown compression codec"):
        decode_batch(msgpack.packb(fields))
