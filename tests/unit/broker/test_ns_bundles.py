"""Goal: bundle math matches Pulsar — CRC32 topic hash, initial boundaries, names,
and every hash falling in exactly one bundle, the last bundle closed at 0xffffffff.
Method: pure functions; a property test over random boundaries and hashes."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minipulsar.broker.namespace.bundles import (
    FULL_UPPER,
    BundleRange,
    NamespaceBundle,
    NamespaceBundles,
    initial_boundaries,
    parse_boundary,
    topic_hash,
)


def test_topic_hash_is_the_crc32_of_the_full_topic_name() -> None:
    topic = "persistent://public/default/my-topic"
    assert topic_hash(topic) == zlib.crc32(topic.encode()) == 0x2BAD45F7  # java.util.zip.CRC32 agrees
    assert topic_hash("persistent://public/default/my-topic-partition-1") != topic_hash(topic)
    assert 0 <= topic_hash("non-persistent://t/ns/x") <= FULL_UPPER


def test_four_bundles_have_pulsars_default_boundaries() -> None:
    assert initial_boundaries(4) == (0x00000000, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF)
    assert initial_boundaries(1) == (0, FULL_UPPER)
    bundles = NamespaceBundles("public/default", initial_boundaries(4))
    assert [b.name for b in bundles.bundles] == [
        "public/default/0x00000000_0x40000000",
        "public/default/0x40000000_0x80000000",
        "public/default/0x80000000_0xc0000000",
        "public/default/0xc0000000_0xffffffff",
    ]


def test_three_bundles_split_the_space_in_near_equal_segments() -> None:
    assert initial_boundaries(3) == (0, 0x55555555, 0xAAAAAAAA, FULL_UPPER)


def test_bundle_of_hash_at_the_edges() -> None:
    bundles = NamespaceBundles("t/ns", initial_boundaries(4))
    assert bundles.find_hash(0).range == BundleRange(0, 0x40000000)
    assert bundles.find_hash(0x3FFFFFFF).range == BundleRange(0, 0x40000000)
    assert bundles.find_hash(0x40000000).range == BundleRange(0x40000000, 0x80000000)
    assert bundles.find_hash(FULL_UPPER).range == BundleRange(0xC0000000, FULL_UPPER)  # the last one is closed


def test_topic_maps_to_the_bundle_containing_its_hash() -> None:
    bundles = NamespaceBundles("public/default", initial_boundaries(16))
    topic = "persistent://public/default/orders"
    bundle = bundles.find(topic)
    assert bundle.range.contains(topic_hash(topic))
    assert bundle.contains_topic(topic, "public/default")
    assert not bundle.contains_topic(topic, "public/other")


def test_range_names_round_trip_and_bad_ones_are_refused() -> None:
    r = BundleRange.parse("0x40000000_0x80000000")
    assert (r.lower, r.upper, r.name, str(r)) == (0x40000000, 0x80000000, "0x40000000_0x80000000", r.name)
    for bad in ("0x4000_0x8000", "40000000_80000000", "0x80000000_0x40000000", "", None):
        with pytest.raises(ValueError):
            BundleRange.parse(bad)  # type: ignore[arg-type]
    bundle = NamespaceBundle.parse("public/default/0x00000000_0xffffffff")
    assert bundle == NamespaceBundle("public/default", BundleRange(0, FULL_UPPER))
    for bad in ("default/0x00000000_0xffffffff", "a/b/c/0x00000000_0xffffffff", "a//0x00000000_0xffffffff"):
        with pytest.raises(ValueError):
            NamespaceBundle.parse(bad)


def test_boundaries_must_cover_the_space_in_increasing_order() -> None:
    for bad in ((0,), (1, FULL_UPPER), (0, 5, 5, FULL_UPPER), (0, 0x10)):
        with pytest.raises(ValueError):
            NamespaceBundles("t/ns", bad)
    with pytest.raises(ValueError):
        parse_boundary("0x100000000")
    with pytest.raises(ValueError):
        initial_boundaries(0)


def test_policy_form_round_trips_and_has_finds_only_exact_bundles() -> None:
    bundles = NamespaceBundles("t/ns", (0, 0x20000000, 0x40000000, FULL_UPPER), version=3)
    policy = bundles.to_policy()
    assert policy == {"boundaries": ["0x00000000", "0x20000000", "0x40000000", "0xffffffff"], "numBundles": 3}
    again = NamespaceBundles.from_policy("t/ns", policy, 3)
    assert again == bundles
    assert again.has(BundleRange(0x20000000, 0x40000000))
    assert not again.has(BundleRange(0, 0x40000000))  # a parent of two bundles
    assert not again.has(BundleRange(0x40000000, 0x80000000))
    with pytest.raises(ValueError):
        NamespaceBundles.from_policy("t/ns", {"numBundles": 4})


@given(st.sets(st.integers(1, FULL_UPPER - 1), max_size=30), st.integers(0, FULL_UPPER))
def test_every_hash_is_in_exactly_one_bundle(cuts: set[int], hash_value: int) -> None:
    bundles = NamespaceBundles("t/ns", (0, *sorted(cuts), FULL_UPPER))
    containing = [r for r in bundles.ranges if r.contains(hash_value)]
    assert containing == [bundles.find_hash(hash_value).range]
