"""Goal: the entry payload format round-trips, and the broker can count a batch's messages
from its first bytes for every msgpack integer width the count can take."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipulsar.errors import MalformedCommandError
from minipulsar.protocol.batch import Batch, BatchMessage, decode_batch, encode_batch, peek_num_messages

messages = st.builds(
    BatchMessage,
    sequence_id=st.integers(0, 2**63 - 1),
    data=st.none() | st.binary(max_size=2048),
    key=st.none() | st.text(max_size=20),
    properties=st.none() | st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=4),
    event_time_ms=st.integers(0, 2**63 - 1),
)


@settings(max_examples=50, deadline=None)
@given(
    publish_time_ms=st.integers(0, 2**63 - 1), producer_name=st.text(max_size=30), batch=st.lists(messages, max_size=20)
)
def test_batch_round_trips(publish_time_ms: int, producer_name: str, batch: list[BatchMessage]) -> None:
    payload = encode_batch(publish_time_ms, producer_name, batch)
    assert decode_batch(payload) == Batch(publish_time_ms, producer_name, batch)
    assert peek_num_messages(payload) == len(batch)


# Each msgpack encoding of the count, at both ends: fixint, uint8, uint16, uint32.
COUNT_ENCODINGS = {0: 0x00, 1: 0x01, 127: 0x7F, 128: 0xCC, 255: 0xCC, 256: 0xCD, 65535: 0xCD, 65536: 0xCE, 70000: 0xCE}


@pytest.mark.parametrize("count", sorted(COUNT_ENCODINGS))
def test_peek_num_messages_reads_every_count_width(count: int) -> None:
    batch = [BatchMessage(sequence_id=i, data=b"") for i in range(count)]
    payload = encode_batch(1, "p", batch)
    assert payload[1] == COUNT_ENCODINGS[count], "the boundary exercises the intended encoding"
    assert peek_num_messages(payload) == count
    assert len(decode_batch(payload).messages) == count


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x94", b"\x94\xcd\x01", b"\x93\x01", b"raw bytes", b"\x94\xd0\x01"],
    ids=["empty", "truncated", "truncated-uint16", "not-a-batch", "raw", "int8"],
)
def test_peek_num_messages_falls_back_to_default(payload: bytes) -> None:
    assert peek_num_messages(payload, default=1) == 1
    assert peek_num_messages(payload, default=7) == 7


@pytest.mark.parametrize(
    "payload",
    [b"", b"\xc1", b"\x94\x01\x02\xa1p\x90", b"\x94\x01\x02\xa1p\x91\x90", b"\x93\x01\x02\x03"],
    ids=["empty", "garbage", "count-mismatch", "bad-message", "three-fields"],
)
def test_decode_batch_rejects_non_batches(payload: bytes) -> None:
    with pytest.raises(MalformedCommandError):
        decode_batch(payload)


_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=8) | st.binary(max_size=8)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=6), max_leaves=30)


_COMPRESSED = st.tuples(
    _SCALARS,
    _SCALARS,
    _SCALARS,
    _SCALARS,
    st.tuples(
        st.sampled_from(["LZ4", "ZLIB", "ZSTD", "NONE", "SNAPPY"]) | _SCALARS,
        _SCALARS | st.integers(-5, 100),
        st.binary(max_size=32) | _SCALARS,
    ),
).map(list)


@given(
    st.binary(max_size=64)
    | _VALUES.map(lambda value: msgpack.packb(value, use_bin_type=True))
    | _COMPRESSED.map(lambda value: msgpack.packb(value, use_bin_type=True))
)
def test_any_entry_payload_decodes_or_is_refused_as_malformed(payload: bytes) -> None:
    """Garbage of any shape (raw bytes, or msgpack of the wrong structure) is a
    MalformedCommandError, never another exception: the broker answers it and goes on."""
    try:
        decode_batch(payload)
    except MalformedCommandError:
        pass
