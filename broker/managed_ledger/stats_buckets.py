"""StatsBuckets: Pulsar's frequency distribution of one stats interval (``StatsBuckets`` of
Pulsar's managed ledger), and the gauge names Pulsar exports it under.

Values are counted in buckets bounded by ``boundaries`` (upper bounds, inclusive: a value
equal to a bound counts in that bound's bucket) plus one overflow bucket above the last bound.
:meth:`StatsBuckets.refresh` ends the interval: the counts, their number and their sum move
to :attr:`StatsBuckets.buckets`, :attr:`~StatsBuckets.count` and :attr:`~StatsBuckets.sum`
(what /metrics reports until the next refresh) and counting starts again from zero. So the
exported numbers are those of the last complete ``statsUpdateFrequencyInSecs`` interval, not
totals since start (Pulsar's semantics; a cumulative histogram is exported beside it).

Invariants:

- ``sum(buckets) == count`` after every refresh;
- written by one thread (the event loop): ``add_value`` is a bisect and two additions.
"""

from __future__ import annotations

from bisect import bisect_left

WRITE_LATENCY_BUCKETS_MS = (0.5, 1.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 1000.0)
"""Pulsar's ``ENTRY_LATENCY_BUCKETS_USEC``, in milliseconds."""


class StatsBuckets:
    __slots__ = ("_boundaries", "_counts", "_sum", "buckets", "count", "sum")

    def __init__(self, boundaries: tuple[float, ...]) -> None:
        assert boundaries and list(boundaries) == sorted(boundaries), f"boundaries must ascend: {boundaries}"
        self._boundaries = boundaries
        self._counts = [0] * (len(boundaries) + 1)
        """The interval being counted, per bucket (not cumulative); the last is the overflow."""
        self._sum = 0.0
        self.buckets: tuple[int, ...] = (0,) * (len(boundaries) + 1)
        """The last complete interval's counts, per bucket, overflow last."""
        self.count = 0
        self.sum = 0.0

    def add_value(self, value: float) -> None:
        self._counts[bisect_left(self._boundaries, value)] += 1
        self._sum += value

    def refresh(self) -> None:
        """End the interval: what it counted becomes what is reported; count anew."""
        counts = self._counts
        self.buckets = tuple(counts)
        self.count = sum(counts)
        self.sum = self._sum
        self._counts = [0] * len(counts)
        self._sum = 0.0


def bucket_metric_names(prefix: str, boundaries: tuple[float, ...]) -> tuple[str, ...]:
    """Pulsar's gauge name of each bucket, overflow last: ``<prefix>_le_0_5``, ``_le_1``, …,
    ``_le_1000``, ``_le_overflow`` (a bound's ``.`` becomes ``_``; whole bounds lose ``.0``)."""
    names = [f"{prefix}_le_{_bound_suffix(bound)}" for bound in boundaries]
    return (*names, f"{prefix}_le_overflow")


def _bound_suffix(bound: float) -> str:
    text = str(int(bound)) if float(bound).is_integer() else repr(float(bound))
    return text.replace(".", "_")
