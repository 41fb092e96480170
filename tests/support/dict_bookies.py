"""A fake of the BookKeeper client's :class:`~minipulsar.bookkeeper.bookie_client.BookieClient`
answering from dicts, for unit tests of readers and recovery (no sockets): every answer is
ready at once, so replicas answer in the order they are asked."""

from __future__ import annotations

import asyncio
from typing import Any

from minipulsar.errors import NoSuchEntryError, RequestTimeoutError
from minipulsar.protocol.commands import AddEntryResponse, ReadEntryResponse, ReadLacResponse


class DictBookies:
    """What recovery asks of a BookieClient, answered from ``entries[bookie][entry_id]``;
    ``failing`` bookies time out on reads."""

    def __init__(self, entries: dict[str, dict[int, bytes]], lac: int, failing: frozenset[str] = frozenset()) -> None:
        self.entries, self.lac, self.failing = entries, lac, failing
        self.adds: list[tuple[str, int, bytes, bool, bytes]] = []
        self.fences: list[tuple[str, bytes]] = []
        self.reads: list[tuple[str, int, int]] = []
        """``(bookie, first entry, count)`` of every READ_ENTRY, in order."""

    def _done(self, result: Any) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
        return future

    def read_lac(self, bookie: str, ledger_id: int, fence: bool = False, master_key: bytes = b"") -> asyncio.Future:
        if fence:
            self.fences.append((bookie, master_key))
        last = max(self.entries[bookie], default=-1)
        return self._done(ReadLacResponse(id=1, ledger_id=ledger_id, lac=self.lac, last_entry_id=last))

    def read_entries(self, bookie: str, ledger_id: int, first: int, count: int, max_bytes: int = 0) -> asyncio.Future:
        self.reads.append((bookie, first, count))
        if bookie in self.failing:
            return self._done(RequestTimeoutError(f"{bookie} timed out"))
        held = self.entries[bookie]
        if first not in held:
            return self._done(NoSuchEntryError(f"{bookie} has no entry {first}"))
        entries = [[e, held[e]] for e in range(first, first + count) if e in held]
        return self._done(ReadEntryResponse(id=1, ledger_id=ledger_id, entries=entries, lac=self.lac))

    def add_entry(
        self,
        bookie: str,
        ledger_id: int,
        entry_id: int,
        lac: int,
        payload: bytes,
        recovery: bool = False,
        *,
        master_key: bytes,
    ) -> asyncio.Future:
        self.adds.append((bookie, entry_id, payload, recovery, master_key))
        self.entries[bookie][entry_id] = payload
        return self._done(AddEntryResponse(id=1, ledger_id=ledger_id, entry_id=entry_id))
