"""LedgerFragment: the entries of one ensemble segment stored on one bookie, and the pure
computations on a ledger's metadata that AutoRecovery needs (BookKeeper's ``LedgerFragment``
and the fragment walk of ``LedgerChecker``).

Segment ``i`` of a ledger covers entries ``first_i .. first_{i+1} - 1`` (the last segment up
to the ledger's last entry). With ensemble size E and write quorum Qw, the bookie at position
``p`` of a segment stores entry ``e`` iff ``(p - e) mod E < Qw`` (the write set of ``e`` is the
Qw positions from ``e mod E``). A fragment with no entry is never produced.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata


@dataclass(frozen=True, slots=True)
class LedgerFragment:
    ledger_id: int
    segment_index: int
    """Index of the segment in ``LedgerMetadata.ensembles``."""
    first_entry_id: int
    last_entry_id: int
    """Inclusive; the segment's bounds (the bookie holds the entries of them it stores)."""
    bookie: str
    bookie_index: int
    """The bookie's position in the segment's ensemble."""
    ensemble_size: int
    write_quorum: int

    def stores(self, entry_id: int) -> bool:
        """Whether this fragment's bookie stores ``entry_id`` (in the segment's range)."""
        in_range = self.first_entry_id <= entry_id <= self.last_entry_id
        return in_range and (self.bookie_index - entry_id) % self.ensemble_size < self.write_quorum

    def entry_ids(self) -> Iterator[int]:
        """The entries of the segment this bookie stores, in order."""
        if self.ensemble_size == self.write_quorum:
            yield from range(self.first_entry_id, self.last_entry_id + 1)
            return
        for entry_id in range(self.first_entry_id, self.last_entry_id + 1):
            if self.stores(entry_id):
                yield entry_id

    @property
    def first_stored(self) -> int | None:
        return next(self.entry_ids(), None)

    @property
    def last_stored(self) -> int | None:
        lowest = max(self.first_entry_id, self.last_entry_id - self.ensemble_size + 1)
        return next((e for e in range(self.last_entry_id, lowest - 1, -1) if self.stores(e)), None)


def segment_bounds(metadata: LedgerMetadata, last_entry_id: int) -> list[tuple[int, int, int]]:
    """``(segment index, first entry, last entry)`` of every segment holding entries up to
    ``last_entry_id``; empty segments are left out."""
    bounds = []
    segments = metadata.ensembles
    for index, (first, _) in enumerate(segments):
        end = segments[index + 1][0] - 1 if index + 1 < len(segments) else last_entry_id
        end = min(end, last_entry_id)
        if end >= first:
            bounds.append((index, first, end))
    return bounds


def fragments_of(metadata: LedgerMetadata, last_entry_id: int) -> list[LedgerFragment]:
    """Every non-empty fragment of the ledger's entries ``0 .. last_entry_id``."""
    fragments = []
    for index, first, last in segment_bounds(metadata, last_entry_id):
        ensemble = metadata.ensembles[index][1]
        for position, bookie in enumerate(ensemble):
            fragment = LedgerFragment(
                metadata.ledger_id, index, first, last, bookie, position, metadata.ensemble_size, metadata.write_quorum
            )
            if fragment.first_stored is not None:
                fragments.append(fragment)
    return fragments


def fragments_on(metadata: LedgerMetadata, last_entry_id: int, bookies: Collection[str]) -> list[LedgerFragment]:
    """The fragments stored on any of ``bookies``."""
    return [f for f in fragments_of(metadata, last_entry_id) if f.bookie in bookies]


def bookies_of(metadata: LedgerMetadata) -> frozenset[str]:
    """Every bookie named by any segment of the ledger (BookKeeper's ``BookieLedgerIndexer``
    indexes ledgers by these)."""
    return frozenset(bookie for _, ensemble in metadata.ensembles for bookie in ensemble)


def in_last_segment(metadata: LedgerMetadata, fragment: LedgerFragment) -> bool:
    return fragment.segment_index == len(metadata.ensembles) - 1


def replace_bookie(
    metadata: LedgerMetadata, segment_index: int, bookie_index: int, old: str, new: str
) -> LedgerMetadata:
    """The metadata with ``new`` in ``old``'s place in one segment.

    Raises:
        ValueError: ``old`` is no longer at that place, or ``new`` is already in the segment.
    """
    segments = list(metadata.ensembles)
    first, ensemble = segments[segment_index]
    if ensemble[bookie_index] != old:
        raise ValueError(f"ledger {metadata.ledger_id} segment {segment_index}: {old} is no longer at {bookie_index}")
    if new in ensemble:
        raise ValueError(f"ledger {metadata.ledger_id} segment {segment_index}: {new} is already in {list(ensemble)}")
    replaced = list(ensemble)
    replaced[bookie_index] = new
    segments[segment_index] = (first, tuple(replaced))
    return dataclasses.replace(metadata, ensembles=tuple(segments))
