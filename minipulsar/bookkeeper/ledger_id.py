"""Ledger ids unique across brokers, allocated in ranges so creating a ledger rarely costs a
metadata round trip: one compare-and-set on ``/ledgers/idgen`` reserves ``RANGE_SIZE`` ids.
Ids of a range a broker did not use before it stopped are simply never used.

A managed ledger orders positions by ledger id, so a topic's next ledger must get a higher id
than its last one even when the topic moved between brokers: ``allocate(above=last)`` drops
the rest of this broker's range when it is not above ``last`` and reserves a fresh one. That
one is above every id any broker has been given (the shared counter only grows), so one
reservation always suffices.

Invariants:

- no id is given out twice, by any broker;
- ``allocate(above=n)`` returns an id greater than ``n``.
"""

from __future__ import annotations

import asyncio

from minipulsar.errors import AlreadyExistsError, BadVersionError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore

IDGEN_PATH = "/ledgers/idgen"
RANGE_SIZE = 1000


class LedgerIdAllocator:
    def __init__(self, store: MetadataStore, range_size: int = RANGE_SIZE) -> None:
        self._store = store
        self._range_size = range_size
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def allocate(self, above: int = -1) -> int:
        """A fresh ledger id, greater than ``above``."""
        async with self._lock:
            if self._next >= self._end or self._next <= above:
                self._next, self._end = await self._reserve_range()
                assert self._next > above, "the shared counter is past every id handed out"
            ledger_id = self._next
            self._next += 1
            return ledger_id

    async def _reserve_range(self) -> tuple[int, int]:
        while True:
            current = await self._store.get(IDGEN_PATH)
            start = int(current.value) if current else 0
            end = start + self._range_size
            try:
                await self._store.put(IDGEN_PATH, str(end).encode(), current.version if current else NOT_EXISTS)
            except (BadVersionError, AlreadyExistsError):
                continue  # another broker reserved a range first; read again
            return start, end
