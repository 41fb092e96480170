"""MessageId: Pulsar's fields, constants, ordering, equality, hashing and protobuf bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minipulsar.client.message_id import INT64_MAX, MessageId

ids = st.builds(
    MessageId,
    st.integers(-1, 2**31 - 1),
    st.integers(-1, INT64_MAX),
    st.integers(-1, INT64_MAX),
    st.integers(-1, 2**31 - 1),
)


def test_earliest_and_latest_are_pulsars() -> None:
    assert (
        MessageId.earliest.partition(),
        MessageId.earliest.ledger_id(),
        MessageId.earliest.entry_id(),
        MessageId.earliest.batch_index(),
    ) == (-1, -1, -1, -1)
    assert (MessageId.latest.ledger_id(), MessageId.latest.entry_id()) == (INT64_MAX, INT64_MAX)
    assert MessageId.earliest < MessageId(-1, 0, 0) < MessageId.latest


def test_constructor_order_and_str_are_the_official_clients() -> None:
    """``MessageId(partition, ledger_id, entry_id, batch_index)``; ``str`` is C++'s
    ``(ledger,entry,partition,batch)``."""
    message_id = MessageId(2, 10, 20, 3)
    assert (message_id.partition(), message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()) == (
        2,
        10,
        20,
        3,
    )
    assert str(message_id) == "(10,20,2,3)"


def test_order_is_ledger_entry_batch_index_and_ignores_the_partition() -> None:
    assert MessageId(-1, 1, 5) < MessageId(-1, 2, 0)
    assert MessageId(-1, 2, 0) < MessageId(-1, 2, 1)
    assert MessageId(-1, 2, 1, -1) < MessageId(-1, 2, 1, 0) < MessageId(-1, 2, 1, 1)
    assert sorted([MessageId(-1, 3, 0), MessageId(-1, 1, 9), MessageId(-1, 1, 2, 4)]) == [
        MessageId(-1, 1, 2, 4),
        MessageId(-1, 1, 9),
        MessageId(-1, 3, 0),
    ]
    # As C++ pulsar::MessageId: < ignores the partition, == does not.
    p0, p1 = MessageId(0, 1, 1), MessageId(1, 1, 1)
    assert not p0 < p1 and not p1 < p0 and p0 != p1
    assert p0 >= p1 and p0 > p1 and not p0 <= p1  # C++: > is !(<=), >= is !(<)


def test_equal_ids_hash_equal_and_the_topic_is_no_part_of_either() -> None:
    a = MessageId(1, 7, 8, 2)
    b = MessageId(1, 7, 8, 2, topic="persistent://public/default/t-partition-1")
    assert a == b and hash(a) == hash(b)
    assert len({a, b, MessageId(1, 7, 8, 3)}) == 2
    assert b.topic_name() == "persistent://public/default/t-partition-1" and a.topic_name() is None
    assert a != (1, 7, 8, 2)


def test_serialize_writes_pulsars_message_id_data_protobuf() -> None:
    """ledgerId=1, entryId=2 (varint uint64); partition=3, batch_index=4 only when not -1 —
    the bytes the official client's serialize() gives."""
    assert MessageId(-1, 1, 2).serialize() == bytes([0x08, 1, 0x10, 2])
    assert MessageId(3, 300, 2, 5).serialize() == bytes([0x08, 0xAC, 0x02, 0x10, 2, 0x18, 3, 0x20, 5])
    assert (
        MessageId.earliest.serialize() == bytes([0x08]) + b"\xff" * 9 + b"\x01" + bytes([0x10]) + b"\xff" * 9 + b"\x01"
    )


@given(ids)
def test_deserialize_inverts_serialize(message_id: MessageId) -> None:
    again = MessageId.deserialize(message_id.serialize())
    assert again == message_id and hash(again) == hash(message_id)


def test_deserialize_takes_a_topic_and_skips_unknown_fields() -> None:
    data = MessageId(-1, 5, 6).serialize() + bytes([0x2A, 2, 0xFF, 0xFF])  # field 5 (ack_set), length-delimited
    message_id = MessageId.deserialize(data, topic="persistent://public/default/t")
    assert message_id == MessageId(-1, 5, 6) and message_id.topic_name() == "persistent://public/default/t"


@pytest.mark.parametrize("data", [b"", b"\x08", b"\x08\x01", b"\x08\x01\x10", b"\x0b\x01\x10\x02"])
def test_deserialize_rejects_what_is_not_a_message_id(data: bytes) -> None:
    with pytest.raises(ValueError):
        MessageId.deserialize(data)
