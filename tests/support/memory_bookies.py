"""An in-memory :class:`~broker.managed_ledger.ledger_client.LedgerClient` for unit tests of the
cursor ledger's logic (cursor_ledger.py): ledgers are lists of entries.

- ``create_ledger`` gives a writable handle; ``open_ledger(recovery=True)`` fences and closes
  the ledger, so its writer's later adds fail with LedgerFencedError, as on real bookies;
- ``down = True`` makes every create and add fail with NotEnoughBookiesError (reads still work),
  ``refuse_creates = True`` only the creates (too few writable bookies for a new ensemble);
- ``created``, ``deleted``, ``adds`` and ``add_times_s`` record what happened, in order.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from minipulsar.errors import LedgerFencedError, NoSuchEntryError, NoSuchLedgerError, NotEnoughBookiesError

if TYPE_CHECKING:
    from minipulsar.bookkeeper.ledger_handle import LedgerHandle


@dataclass
class MemoryLedgerState:
    ledger_id: int
    custom: dict[str, str]
    entries: list[bytes] = field(default_factory=list)
    closed: bool = False


class MemoryLedgerHandle:
    def __init__(self, bookies: MemoryBookies, state: MemoryLedgerState, writable: bool) -> None:
        self._bookies = bookies
        self._state = state
        self.writable = writable

    @property
    def ledger_id(self) -> int:
        return self._state.ledger_id

    @property
    def last_entry_id(self) -> int:
        return len(self._state.entries) - 1

    def add(self, payload: bytes) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._bookies.down:
            future.set_exception(NotEnoughBookiesError("the test's bookies are down"))
        elif self._state.closed or not self.writable:
            future.set_exception(LedgerFencedError(f"ledger {self.ledger_id} is fenced"))
        else:
            self._state.entries.append(payload)
            self._bookies.adds.append((self.ledger_id, payload))
            self._bookies.add_times_s.append(time.monotonic())
            future.set_result(len(self._state.entries) - 1)
        return future

    async def close(self) -> None:
        self._state.closed = True

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[tuple[int, bytes]]:
        if last_entry_id > self.last_entry_id:
            raise NoSuchEntryError(f"ledger {self.ledger_id} has entries up to {self.last_entry_id}")
        return [(i, self._state.entries[i]) for i in range(first_entry_id, last_entry_id + 1)]


class MemoryBookies:
    def __init__(self, first_id: int = 1000) -> None:
        self.ledgers: dict[int, MemoryLedgerState] = {}
        self._next_id = first_id
        self.down = False
        self.refuse_creates = False
        self.created: list[int] = []
        self.deleted: list[int] = []
        self.adds: list[tuple[int, bytes]] = []
        self.add_times_s: list[float] = []

    def last_entry(self, ledger_id: int) -> bytes:
        return self.ledgers[ledger_id].entries[-1]

    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        custom: dict[str, str] | None = None,
        *,
        id_above: int = -1,
    ) -> LedgerHandle:
        if self.down or self.refuse_creates:
            raise NotEnoughBookiesError("the test's bookies are down")
        ledger_id = self._next_id = max(self._next_id, id_above + 1)
        self._next_id += 1
        self.ledgers[ledger_id] = state = MemoryLedgerState(ledger_id, dict(custom or {}))
        self.created.append(ledger_id)
        return cast(Any, MemoryLedgerHandle(self, state, writable=True))

    async def open_ledger(self, ledger_id: int, *, recovery: bool = True) -> LedgerHandle:
        state = self.ledgers.get(ledger_id)
        if state is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} has no metadata")
        if recovery:
            state.closed = True
        return cast(Any, MemoryLedgerHandle(self, state, writable=False))

    async def delete_ledger(self, ledger_id: int) -> None:
        self.ledgers.pop(ledger_id, None)
        self.deleted.append(ledger_id)
