"""Ledger ids: unique across brokers, and above a given id when a managed ledger asks."""

from __future__ import annotations

import uuid

from minipulsar.bookkeeper.ledger_id import LedgerIdAllocator
from minipulsar.metadata import open_metadata_store


async def test_ids_are_unique_across_allocators_and_above_the_asked_minimum():
    store = await open_metadata_store(f"memory://{uuid.uuid4()}")
    try:
        broker_a, broker_b = LedgerIdAllocator(store, range_size=10), LedgerIdAllocator(store, range_size=10)
        first_a = await broker_a.allocate()
        first_b = await broker_b.allocate()
        assert (first_a, first_b) == (0, 10)
        # a topic that moved from B back to A must not go back to A's lower range
        moved = await broker_a.allocate(above=first_b)
        assert moved > first_b
        assert await broker_a.allocate() == moved + 1, "the fresh range is used from then on"
        ids = [await broker_b.allocate() for _ in range(25)] + [await broker_a.allocate() for _ in range(25)]
        assert len(set(ids) | {first_a, first_b, moved}) == 53
    finally:
        await store.close()
