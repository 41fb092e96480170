"""The records in flight between a journal's two halves: admitted on the loop, written by the
writer thread, completed on the loop again.

Invariants:
- a :data:`PendingRecord`'s ``size`` is its bytes in the segment: header + payload;
- a :class:`Batch` holds exactly two buffers per record (header, payload), in record order,
  and its ``size`` is the sum of its records' sizes: ready for one ``pwritev``.
"""

from __future__ import annotations

from typing import Any, Final

from minipulsar.bookie.journal.format import RecordType

PendingRecord = tuple[Any, Any, float, int, RecordType]
"""One admitted record: ``(request, sink, started, size, record type)`` — the
:class:`~bookie.journal.journal.JournalRequest`, the
:class:`~bookie.journal.journal.JournalSink` to tell, the caller's clock when it arrived
(handed back to the sink), its bytes in the segment, and what it is. A plain tuple, not a
class: the loop makes one per add, and a run of them in C (``zip``)."""
RECORD_SIZE: Final = 3
"""Index of ``size`` in a :data:`PendingRecord`."""


class Batch:
    """The records admitted in one loop iteration, handed to the writer thread together."""

    __slots__ = ("buffers", "enqueued_at", "records", "size")

    def __init__(self, records: list[PendingRecord], buffers: list[bytes], size: int, enqueued_at: float) -> None:
        self.records = records
        self.buffers = buffers
        """Header, payload, header, payload, ...: exactly two per record, ready for ``pwritev``."""
        self.size = size
        self.enqueued_at = enqueued_at
        """When its first record was admitted (``time.monotonic``)."""
