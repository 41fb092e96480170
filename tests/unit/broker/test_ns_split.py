"""Goal: the split algorithms cut where Pulsar's do and never produce an empty half.
Method: pure functions on hand-picked ranges and topic hashes, plus a property test."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minipulsar.broker.namespace.bundles import FULL_UPPER, BundleRange, NamespaceBundles, initial_boundaries
from minipulsar.broker.namespace.split import (
    children,
    range_equally_divide,
    split_boundaries,
    split_position,
    topic_count_equally_divide,
)


def test_range_equally_divide_cuts_in_the_middle() -> None:
    assert range_equally_divide(BundleRange(0, 0x40000000)) == 0x20000000
    assert range_equally_divide(BundleRange(0xC0000000, FULL_UPPER)) == 0xC0000000 + (0x3FFFFFFF // 2)
    assert range_equally_divide(BundleRange(10, 11)) is None  # width 1 cannot split


def test_topic_count_equally_divide_cuts_between_the_two_middle_topics() -> None:
    r = BundleRange(0, 0x1000)
    # sorted hashes 0x100 0x200 0x300 0x400: s = h[1] = 0x200, e = h[2] = 0x300 → 0x280
    assert topic_count_equally_divide(r, [0x400, 0x100, 0x300, 0x200]) == 0x280
    # odd count 3: s = h[0], e = h[1]
    assert topic_count_equally_divide(r, [0x100, 0x200, 0x900]) == 0x180
    lower, _upper = children(r, 0x280)
    assert [h for h in (0x100, 0x200, 0x300, 0x400) if lower.contains(h)] == [0x100, 0x200]


def test_topic_count_equally_divide_needs_two_topics_inside_the_range() -> None:
    r = BundleRange(0x1000, 0x2000)
    assert topic_count_equally_divide(r, []) is None
    assert topic_count_equally_divide(r, [0x1500]) is None
    assert topic_count_equally_divide(r, [0x1500, 0x3000]) is None  # one is outside the bundle
    assert topic_count_equally_divide(r, [0x1000, 0x1000]) is None  # the cut would leave the lower half empty


def test_adjacent_hashes_land_in_different_halves() -> None:
    position = topic_count_equally_divide(BundleRange(0, 0x100), [0x10, 0x11])
    lower, upper = children(BundleRange(0, 0x100), position)
    assert lower.contains(0x10) and upper.contains(0x11)


def test_unknown_algorithm_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown split algorithm 'flow_or_qps'"):
        split_position("flow_or_qps", BundleRange(0, 100))


def test_split_boundaries_inserts_the_cut_into_that_bundle_only() -> None:
    boundaries = initial_boundaries(4)
    result = split_boundaries(boundaries, BundleRange(0x40000000, 0x80000000), 0x60000000)
    assert result == (0, 0x40000000, 0x60000000, 0x80000000, 0xC0000000, FULL_UPPER)
    with pytest.raises(ValueError, match="not a bundle"):
        split_boundaries(boundaries, BundleRange(0, 0x80000000), 0x60000000)
    with pytest.raises(ValueError, match="not inside"):
        split_boundaries(boundaries, BundleRange(0, 0x40000000), 0x40000000)


@given(
    st.integers(0, FULL_UPPER - 2),
    st.integers(2, FULL_UPPER),
    st.lists(st.integers(0, FULL_UPPER), max_size=40),
    st.sampled_from(["range_equally_divide", "topic_count_equally_divide"]),
)
def test_a_split_position_leaves_two_non_empty_halves(
    lower: int, width: int, hashes: list[int], algorithm: str
) -> None:
    upper = min(lower + width, FULL_UPPER)
    r = BundleRange(lower, upper)
    position = split_position(algorithm, r, hashes)
    if position is None:
        return
    assert lower < position < upper
    new = NamespaceBundles(
        "t/ns",
        split_boundaries(
            (0, *([lower] if lower else []), upper, *([FULL_UPPER] if upper < FULL_UPPER else [])), r, position
        ),
    )
    assert new.has(BundleRange(lower, position)) and new.has(BundleRange(position, upper))
