"""Goal: split_batch reads back what build_batch wrote (compressed or not), reads a lone
message in the same shape, and refuses a payload whose sizes do not hold together.

Method: batches of messages with every per-message field, through every codec; then
truncated and padded payloads.
"""

from __future__ import annotations

import pytest

from minipulsar.binary_protocol import compression
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.batch import SingleMessage, build_batch, split_batch
from minipulsar.errors import MalformedCommandError

SINGLES = [
    SingleMessage(
        api.SingleMessageMetadata(
            properties=[api.KeyValue(key="a", value="1")],
            partition_key="key-0",
            ordering_key=b"\x00\xffo",
            event_time=1_700_000_000_000,
            sequence_id=10,
            payload_size=5,
        ),
        b"first",
    ),
    SingleMessage(api.SingleMessageMetadata(sequence_id=11, null_value=True, payload_size=0), b""),
    SingleMessage(api.SingleMessageMetadata(sequence_id=12, payload_size=999), b"x" * 3000),  # size fixed on build
]


def batch_metadata(count: int, codec: int = api.NONE, uncompressed_size: int = 0) -> api.MessageMetadata:
    return api.MessageMetadata(
        producer_name="p",
        sequence_id=10,
        publish_time=1,
        num_messages_in_batch=count,
        compression=codec,  # type: ignore[arg-type]
        uncompressed_size=uncompressed_size,
    )


def expected_singles() -> list[SingleMessage]:
    third = api.SingleMessageMetadata(sequence_id=12, payload_size=3000)
    return [*SINGLES[:2], SingleMessage(third, SINGLES[2].payload)]


@pytest.mark.parametrize("codec", [api.NONE, api.LZ4, api.ZLIB, api.ZSTD, api.SNAPPY], ids=compression.codec_name)
def test_a_built_batch_splits_back_into_its_messages(codec: int) -> None:
    payload = build_batch(SINGLES)
    metadata = batch_metadata(len(SINGLES), codec, len(payload))
    assert split_batch(metadata, compression.compress(codec, payload)) == expected_singles()


def test_build_batch_leaves_the_callers_metadata_alone() -> None:
    build_batch(SINGLES)
    assert SINGLES[2].metadata.payload_size == 999


def test_build_batch_layout() -> None:
    single = api.SingleMessageMetadata(payload_size=2)
    serialized = single.SerializeToString()
    assert build_batch([SingleMessage(single, b"hi")]) == len(serialized).to_bytes(4, "big") + serialized + b"hi"
    assert build_batch([]) == b""


def test_a_lone_message_carries_its_fields_like_a_batched_one() -> None:
    metadata = api.MessageMetadata(
        producer_name="p",
        sequence_id=7,
        publish_time=1,
        properties=[api.KeyValue(key="k", value="v")],
        partition_key="key",
        ordering_key=b"ord",
        event_time=99,
        null_value=False,
    )
    (message,) = split_batch(metadata, b"payload")
    assert message == SingleMessage(
        api.SingleMessageMetadata(
            properties=[api.KeyValue(key="k", value="v")],
            partition_key="key",
            ordering_key=b"ord",
            event_time=99,
            sequence_id=7,
            null_value=False,
            payload_size=7,
        ),
        b"payload",
    )


def test_a_compressed_lone_message_is_inflated() -> None:
    metadata = api.MessageMetadata(
        producer_name="p", sequence_id=1, publish_time=1, compression=api.LZ4, uncompressed_size=4000
    )
    (message,) = split_batch(metadata, compression.compress(api.LZ4, b"y" * 4000))
    assert message.payload == b"y" * 4000


@pytest.mark.parametrize(
    ("count", "cut", "match"),
    [
        (3, 0, None),
        (4, 0, "ends inside a message's size"),
        (2, 0, "leaves"),
        (3, -1, "overruns"),
        (3, -3005, "overruns"),
        (-1, 0, "batch of -1"),
    ],
)
def test_sizes_that_do_not_hold_together_are_refused(count: int, cut: int, match: str | None) -> None:
    payload = build_batch(SINGLES)
    if cut:
        payload = payload[:cut]
    if match is None:
        assert len(split_batch(batch_metadata(count), payload)) == count
        return
    with pytest.raises(MalformedCommandError, match=match):
        split_batch(batch_metadata(count), payload)


def test_a_single_metadata_without_payload_size_is_refused() -> None:
    serialized = api.SingleMessageMetadata(sequence_id=1).SerializePartialToString()
    payload = len(serialized).to_bytes(4, "big") + serialized
    with pytest.raises(MalformedCommandError, match="payload_size"):
        split_batch(batch_metadata(1), payload)


def test_a_corrupt_compressed_batch_is_refused() -> None:
    with pytest.raises(MalformedCommandError):
        split_batch(batch_metadata(1, api.ZSTD, 100), b"not zstd at all")
