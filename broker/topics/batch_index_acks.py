"""Which messages of a batch entry are still unacknowledged, for official clients that
acknowledge messages of a batch one by one (``acknowledgmentAtBatchIndexLevelEnabled``,
Pulsar's ``batchDeletedIndexes``).

A batch-index ack carries Pulsar's ``ack_set``: a bit set, as ``int64`` words, of the batch's
indexes *still to acknowledge*. The broker keeps, per entry, the intersection of every
``ack_set`` received; once it is empty the entry is acknowledged whole, and until then a
delivery of the entry carries it, so the client skips what was acknowledged.

Invariants: an entry is held here only while some of its messages are acknowledged and some
are not; the state lives in memory (a new owner of the topic delivers the whole batch again,
at least once, as before the setting).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from minipulsar.broker.managed_ledger.position import Position

WORD_BITS = 64
_WORD_MASK = (1 << WORD_BITS) - 1


def bits_of(words: Sequence[int]) -> int:
    """Pulsar's ``ack_set`` words (signed ``int64``, least significant word first) as one int."""
    return sum((word & _WORD_MASK) << (WORD_BITS * i) for i, word in enumerate(words))


def words_of(bits: int) -> list[int]:
    """:func:`bits_of` reversed: signed ``int64`` words, as protobuf's ``repeated int64``."""
    words = []
    while bits:
        word = bits & _WORD_MASK
        words.append(word - (1 << WORD_BITS) if word >> (WORD_BITS - 1) else word)
        bits >>= WORD_BITS
    return words


class BatchIndexAcks:
    def __init__(self) -> None:
        self._remaining: dict[Position, int] = {}

    def __len__(self) -> int:
        return len(self._remaining)

    def acknowledge(self, position: Position, remaining: int) -> bool:
        """Record an ack of ``position`` leaving ``remaining`` (bits) unacknowledged; True when
        nothing of the entry is left, and it is forgotten here (acknowledge it whole)."""
        left = self._remaining.get(position, remaining) & remaining
        if left:
            self._remaining[position] = left
            return False
        self._remaining.pop(position, None)
        return True

    def remaining(self, position: Position) -> int | None:
        """The entry's messages still to deliver (bits), None when no part of it was acknowledged."""
        return self._remaining.get(position)

    def forget(self, positions: Iterable[Position]) -> None:
        """Entries acknowledged whole."""
        for position in positions:
            self._remaining.pop(position, None)

    def forget_up_to(self, position: Position) -> None:
        """Entries at or before ``position`` (a cumulative ack)."""
        for held in [p for p in self._remaining if p <= position]:
            del self._remaining[held]

    def clear(self) -> None:
        """The cursor was reset (a seek): every entry after it is delivered whole again."""
        self._remaining.clear()
