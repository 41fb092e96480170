"""Namespace bundles: hash ranges over ``[0x00000000, 0xffffffff]`` and topic → bundle.

A namespace's key space is cut by sorted boundaries ``b0 = 0x00000000 < b1 < … < bn = 0xffffffff``;
bundle i is ``[b_i, b_{i+1})`` except the last, which is closed at ``0xffffffff`` so every hash
falls in exactly one bundle. A topic's hash is the CRC32 of its full UTF-8 name
(``persistent://t/ns/topic-partition-3``), as Pulsar's ``NamespaceBundleFactory`` computes it with
``Hashing.crc32()``. Bundle names are ``t/ns/0xLLLLLLLL_0xHHHHHHHH`` (``%08x``).

Pure: no I/O, no asyncio.

Invariants:

- boundaries are sorted, start at 0x00000000 and end at 0xffffffff;
- every hash falls in exactly one bundle.
"""

from __future__ import annotations

import bisect
import itertools
import re
import zlib
from dataclasses import dataclass

FULL_LOWER = 0x00000000
FULL_UPPER = 0xFFFFFFFF

_RANGE_NAME = re.compile(r"^0x([0-9a-fA-F]{8})_0x([0-9a-fA-F]{8})$")


def topic_hash(topic: str) -> int:
    """CRC32 of the full topic name (``domain://tenant/ns/local``), as an unsigned 32-bit int."""
    return zlib.crc32(topic.encode()) & 0xFFFFFFFF


def hex_boundary(value: int) -> str:
    return f"0x{value:08x}"


def parse_boundary(text: str) -> int:
    """``"0x40000000"`` → 0x40000000. Raises ValueError outside the hash space or when malformed."""
    if not isinstance(text, str) or not text.lower().startswith("0x"):
        raise ValueError(f"a bundle boundary is a hex string such as 0x40000000, got {text!r}")
    value = int(text, 16)
    if not FULL_LOWER <= value <= FULL_UPPER:
        raise ValueError(f"bundle boundary {text} is outside 0x00000000-0xffffffff")
    return value


@dataclass(frozen=True, slots=True, order=True)
class BundleRange:
    """``[lower, upper)`` of the hash space; closed at the top when ``upper`` is 0xffffffff."""

    lower: int
    upper: int

    def __post_init__(self) -> None:
        if not FULL_LOWER <= self.lower < self.upper <= FULL_UPPER:
            raise ValueError(f"invalid bundle range 0x{self.lower:08x}_0x{self.upper:08x}")

    @property
    def name(self) -> str:
        return f"0x{self.lower:08x}_0x{self.upper:08x}"

    @property
    def width(self) -> int:
        return self.upper - self.lower

    def contains(self, hash_value: int) -> bool:
        return self.lower <= hash_value < self.upper or (hash_value == self.upper == FULL_UPPER)

    @classmethod
    def parse(cls, text: str) -> BundleRange:
        """``"0x00000000_0x40000000"`` → the range. Raises ValueError when malformed."""
        match = _RANGE_NAME.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"a bundle is written 0xLLLLLLLL_0xHHHHHHHH, got {text!r}")
        return cls(int(match.group(1), 16), int(match.group(2), 16))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class NamespaceBundle:
    """One bundle of one namespace: the unit of ownership, unload and split."""

    namespace: str
    """``tenant/ns``"""
    range: BundleRange

    @property
    def name(self) -> str:
        """``tenant/ns/0xLLLLLLLL_0xHHHHHHHH`` (how Pulsar's admin and load reports name it)."""
        return f"{self.namespace}/{self.range.name}"

    @property
    def range_name(self) -> str:
        return self.range.name

    def contains_topic(self, topic: str, namespace: str) -> bool:
        return namespace == self.namespace and self.range.contains(topic_hash(topic))

    @classmethod
    def parse(cls, name: str) -> NamespaceBundle:
        """``"t/ns/0x00000000_0x40000000"`` → the bundle. Raises ValueError when malformed."""
        namespace, sep, range_name = name.rpartition("/") if isinstance(name, str) else ("", "", "")
        if not sep or namespace.count("/") != 1 or not all(namespace.split("/")):
            raise ValueError(f"a bundle is named tenant/namespace/0xLLLLLLLL_0xHHHHHHHH, got {name!r}")
        return cls(namespace, BundleRange.parse(range_name))

    def __str__(self) -> str:
        return self.name


def initial_boundaries(count: int) -> tuple[int, ...]:
    """``count`` equal ranges: ``0, seg, 2·seg, …, (count−1)·seg, 0xffffffff`` with ``seg = 2^32 // count``
    (4 → 0x00000000, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff, as Pulsar's defaults)."""
    if not 1 <= count <= 1 << 16:
        raise ValueError(f"a namespace has 1 to 65536 bundles, got {count}")
    segment = (1 << 32) // count
    return tuple(i * segment for i in range(count)) + (FULL_UPPER,)


def check_boundaries(boundaries: tuple[int, ...]) -> None:
    """Raise ValueError unless strictly increasing from 0x00000000 to 0xffffffff."""
    if len(boundaries) < 2 or boundaries[0] != FULL_LOWER or boundaries[-1] != FULL_UPPER:
        raise ValueError("bundle boundaries must start at 0x00000000 and end at 0xffffffff")
    if any(a >= b for a, b in itertools.pairwise(boundaries)):
        raise ValueError("bundle boundaries must be strictly increasing")


@dataclass(frozen=True, slots=True)
class NamespaceBundles:
    """A namespace's bundles as its policies hold them. ``version`` is the policies key's version,
    for compare-and-set when a split rewrites the boundaries."""

    namespace: str
    boundaries: tuple[int, ...]
    version: int = -1

    def __post_init__(self) -> None:
        check_boundaries(self.boundaries)

    @property
    def ranges(self) -> list[BundleRange]:
        b = self.boundaries
        return [BundleRange(b[i], b[i + 1]) for i in range(len(b) - 1)]

    @property
    def bundles(self) -> list[NamespaceBundle]:
        return [NamespaceBundle(self.namespace, r) for r in self.ranges]

    def find_hash(self, hash_value: int) -> NamespaceBundle:
        index = min(bisect.bisect_right(self.boundaries, hash_value) - 1, len(self.boundaries) - 2)
        return NamespaceBundle(self.namespace, BundleRange(self.boundaries[index], self.boundaries[index + 1]))

    def find(self, topic: str) -> NamespaceBundle:
        """The bundle serving ``topic`` (its full name, ``domain://tenant/ns/local``)."""
        return self.find_hash(topic_hash(topic))

    def has(self, bundle_range: BundleRange) -> bool:
        """True when ``bundle_range`` is one of these bundles exactly (not a parent or a child)."""
        index = bisect.bisect_left(self.boundaries, bundle_range.lower)
        return (
            index + 1 < len(self.boundaries)
            and self.boundaries[index] == bundle_range.lower
            and self.boundaries[index + 1] == bundle_range.upper
        )

    def to_policy(self) -> dict:
        """Pulsar's ``BundlesData``: ``{"boundaries": ["0x00000000", …], "numBundles": n}``."""
        return {"boundaries": [hex_boundary(b) for b in self.boundaries], "numBundles": len(self.boundaries) - 1}

    @classmethod
    def from_policy(cls, namespace: str, data: dict, version: int = -1) -> NamespaceBundles:
        """From a ``BundlesData`` dict. Raises ValueError when malformed."""
        raw = data.get("boundaries") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            raise ValueError(f"namespace {namespace}: bundles.boundaries is missing")
        return cls(namespace, tuple(parse_boundary(b) for b in raw), version)
