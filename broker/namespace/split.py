"""Bundle split algorithms: where to cut one bundle in two.

- ``range_equally_divide`` (Pulsar's default): the middle of the range, ``lo + (hi − lo) / 2``;
- ``topic_count_equally_divide``: halfway between the two middle topic hashes of the bundle, so each
  half gets about as many topics; no split with fewer than two distinct positions to cut between.

Invariant of a split position ``p``: ``lower < p < upper``, so both children are non-empty ranges.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from minipulsar.broker.namespace.bundles import BundleRange, check_boundaries

RANGE_EQUALLY_DIVIDE = "range_equally_divide"
TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"


def range_equally_divide(bundle_range: BundleRange, topic_hashes: Iterable[int] = ()) -> int | None:
    """The middle of the range; None when it is too narrow to split (width ≤ 1)."""
    if bundle_range.width <= 1:
        return None
    return bundle_range.lower + bundle_range.width // 2


def topic_count_equally_divide(bundle_range: BundleRange, topic_hashes: Iterable[int]) -> int | None:
    """Between the two middle hashes of the bundle's topics: with sorted hashes ``h`` and ``n`` of
    them, ``s = h[max(n/2 − 1, 0)]``, ``e = h[n/2]``, cut at ``s + (e − s) / 2`` (Pulsar's rule).
    None with fewer than two topics, or when the cut would leave one child empty."""
    hashes = sorted(h for h in topic_hashes if bundle_range.contains(h))
    count = len(hashes)
    if count <= 1:
        return None
    start, end = hashes[max(count // 2 - 1, 0)], hashes[count // 2]
    position = start + (end - start) // 2
    if position == start and start < end:
        position = end  # adjacent hashes: cut just below the upper one so they land in different halves
    if not bundle_range.lower < position < bundle_range.upper:
        return None
    return position


ALGORITHMS: dict[str, Callable[[BundleRange, Iterable[int]], int | None]] = {
    RANGE_EQUALLY_DIVIDE: range_equally_divide,
    TOPIC_COUNT_EQUALLY_DIVIDE: topic_count_equally_divide,
}


def split_position(algorithm: str, bundle_range: BundleRange, topic_hashes: Iterable[int] = ()) -> int | None:
    """Where ``algorithm`` cuts ``bundle_range`` (None: it cannot be split that way).

    Raises:
        ValueError: ``algorithm`` is not one of :data:`ALGORITHMS`.
    """
    try:
        divide = ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"unknown split algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}") from None
    return divide(bundle_range, topic_hashes)


def split_boundaries(boundaries: tuple[int, ...], bundle_range: BundleRange, position: int) -> tuple[int, ...]:
    """``boundaries`` with ``position`` inserted inside ``bundle_range``, which must be one of them.

    Raises:
        ValueError: ``bundle_range`` is not a bundle of ``boundaries`` or ``position`` is not inside it.
    """
    index = next(
        (
            i
            for i in range(len(boundaries) - 1)
            if boundaries[i] == bundle_range.lower and boundaries[i + 1] == bundle_range.upper
        ),
        None,
    )
    if index is None:
        raise ValueError(f"bundle {bundle_range} is not a bundle of this namespace (split meanwhile?)")
    if not bundle_range.lower < position < bundle_range.upper:
        raise ValueError(f"split position 0x{position:08x} is not inside {bundle_range}")
    result = boundaries[: index + 1] + (position,) + boundaries[index + 1 :]
    check_boundaries(result)
    return result


def children(bundle_range: BundleRange, position: int) -> tuple[BundleRange, BundleRange]:
    return BundleRange(bundle_range.lower, position), BundleRange(position, bundle_range.upper)
