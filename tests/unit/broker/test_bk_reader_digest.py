"""LedgerReader through the digest: a corrupt entry in a sticky range read is cut off, counted,
and read from the other replica, which becomes the sticky one."""

from __future__ import annotations

import random

from prometheus_client import REGISTRY

from minipulsar.bookkeeper import metrics
from minipulsar.bookkeeper.digest import DigestManager
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata
from minipulsar.bookkeeper.ledger_reader import LedgerReader
from minipulsar.metadata.memory import MemoryMetadataStore
from tests.support.fake_bookies import FakeBookies, fake_context

ENSEMBLE = ("a:1", "b:1")
SEED = 7


def reader_payload(entry_id: int) -> bytes:
    return b"payload %d" % entry_id


async def test_a_corrupt_entry_in_a_sticky_range_read_is_read_from_the_other_replica() -> None:
    """Goal: E=Qw=2, entries 0..9 on both bookies, entry 5 corrupt on the sticky one: the read
    returns the right 10 payloads; the sticky bookie's answer is cut before entry 5, the rest
    comes from the other bookie (asked once), and one mismatch is counted.
    Method: the reader's rng is seeded, so which bookie is sticky is known."""
    digest = DigestManager(3)
    good = {e: digest.package(e, e - 1, 0, reader_payload(e)) for e in range(10)}
    sticky = ENSEMBLE[random.Random(SEED).randrange(1 << 30) % 2]
    other = next(b for b in ENSEMBLE if b != sticky)
    corrupt = dict(good)
    corrupt[5] = good[5][:-1] + bytes([good[5][-1] ^ 1])
    bookies = FakeBookies(ENSEMBLE)
    bookies.put(sticky, 3, corrupt, lac=9)
    bookies.put(other, 3, good, lac=9)
    metadata = LedgerMetadata(
        ledger_id=3, ensemble_size=2, write_quorum=2, ack_quorum=2, ensembles=((0, ENSEMBLE),), last_entry_id=9
    )
    before = REGISTRY.get_sample_value(metrics.PREFIX + "READ_ENTRY_DM") or 0.0
    reader = LedgerReader(fake_context(bookies, MemoryMetadataStore()), random.Random(SEED))
    assert await reader.read(metadata, 0, 9) == [(e, reader_payload(e)) for e in range(10)]
    assert bookies.reads == [(sticky, 0, 10), (other, 5, 5)]
    assert (REGISTRY.get_sample_value(metrics.PREFIX + "READ_ENTRY_DM") or 0.0) - before == 1
    assert await reader.read(metadata, 5, 5) == [(5, reader_payload(5))]
    assert bookies.reads[-1] == (other, 5, 1), "the other bookie is the sticky one now"
