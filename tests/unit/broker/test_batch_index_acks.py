"""Goal: a batch entry's unacknowledged messages are the intersection of its batch-index acks;
the entry is acknowledged whole once none is left; Pulsar's ``int64`` words convert both ways.

Method: BatchIndexAcks and the word conversion on their own.
"""

from __future__ import annotations

from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.topics.batch_index_acks import BatchIndexAcks, bits_of, words_of

ENTRY = Position(3, 7)
ALL_TEN = (1 << 10) - 1


def remaining_after_acking(*indexes: int, size: int = 10) -> int:
    """The ``ack_set`` a client sends after acking ``indexes`` of a batch of ``size``."""
    bits = (1 << size) - 1
    for index in indexes:
        bits &= ~(1 << index)
    return bits


def test_acks_intersect_until_nothing_is_left() -> None:
    acks = BatchIndexAcks()
    assert not acks.acknowledge(ENTRY, remaining_after_acking(0))
    assert not acks.acknowledge(ENTRY, remaining_after_acking(3))  # a client's own set, not cumulative
    assert acks.remaining(ENTRY) == ALL_TEN & ~0b1001
    assert not acks.acknowledge(ENTRY, remaining_after_acking(*range(9)))
    assert acks.remaining(ENTRY) == 1 << 9
    assert acks.acknowledge(ENTRY, remaining_after_acking(9))
    assert acks.remaining(ENTRY) is None and len(acks) == 0


def test_whole_and_cumulative_acks_and_a_reset_forget_entries() -> None:
    acks = BatchIndexAcks()
    for entry_id in range(5):
        acks.acknowledge(Position(3, entry_id), remaining_after_acking(0))
    acks.forget([Position(3, 4)])
    acks.forget_up_to(Position(3, 1))
    assert [acks.remaining(Position(3, e)) is not None for e in range(5)] == [False, False, True, True, False]
    acks.clear()
    assert len(acks) == 0


def test_words_convert_both_ways_with_the_sign_bit_and_several_words() -> None:
    for bits in (0, 1, ALL_TEN, 1 << 63, (1 << 64) - 1, (1 << 100) | 5):
        assert bits_of(words_of(bits)) == bits
    assert words_of(1 << 63) == [-(1 << 63)]
    assert bits_of([-1, 1]) == (1 << 65) - 1
