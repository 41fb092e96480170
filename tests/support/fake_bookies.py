"""In-memory bookies behind the :class:`~minipulsar.bookkeeper.bookie_client.BookieClient`
interface, for unit tests of the BookKeeper client's pure logic (recovery, ensemble changes).

- Each :class:`FakeBookie` keeps entries, a LAC and a fenced flag per ledger, and answers as a
  bookie does: NoSuchLedger/NoSuchEntry for what it never stored, LedgerFenced for a normal add
  to a fenced ledger; a recovery add is taken anyway.
- Reads of an entry in ``unreadable`` fail with an I/O error.
- A ``hung`` bookie never answers.
- A bookie ``down`` refuses every request with ConnectionClosedError (a refused connection);
  ``dies_after_adds`` takes that many more adds, then goes down.
- Answers complete on a later loop iteration (``call_soon``), so concurrent operations
  interleave as they would over sockets; ``requests`` logs every request.
- :func:`fake_context` builds a :class:`ClientContext` whose replacements come from the real
  placement policy over the bookies :attr:`FakeBookies.registered` (a dead bookie stays
  registered until a test says otherwise, as until its session expires).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from minipulsar.bookkeeper.add_budget import AddBudget
from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.cluster_view import ClusterView
from minipulsar.bookkeeper.context import ClientContext
from minipulsar.bookkeeper.placement import DefaultEnsemblePlacementPolicy, select_replacement
from minipulsar.errors import (
    ConnectionClosedError,
    LedgerFencedError,
    MiniPulsarError,
    NoSuchEntryError,
    NoSuchLedgerError,
    PersistenceError,
)
from minipulsar.metadata.store import MetadataStore
from minipulsar.net.rpc import ResponseCallback
from minipulsar.protocol.commands import AddEntryResponse, ReadEntryResponse, ReadLacResponse


@dataclass
class FakeLedgerState:
    entries: dict[int, bytes] = field(default_factory=dict)
    lac: int = -1
    fenced: bool = False


@dataclass
class FakeBookie:
    bookie_id: str
    ledgers: dict[int, FakeLedgerState] = field(default_factory=dict)
    down: bool = False
    dies_after_adds: int | None = None
    hung: bool = False
    """Takes requests and never answers (a SIGSTOPped process)."""
    unreadable: set[int] = field(default_factory=set)
    """Entry ids whose reads fail with an I/O error (a corrupt entry log)."""

    def entry_ids(self, ledger_id: int) -> list[int]:
        state = self.ledgers.get(ledger_id)
        return sorted(state.entries) if state is not None else []


class FakeBookies:
    """A BookieClient stand-in over :class:`FakeBookie` objects, by bookie id."""

    def __init__(self, bookie_ids: Sequence[str]) -> None:
        self.bookies = {bookie_id: FakeBookie(bookie_id) for bookie_id in bookie_ids}
        self.registered: set[str] = set(bookie_ids)
        self.requests: list[tuple[str, str, int, int]] = []
        """(op, bookie, ledger id, entry id or -1), in the order sent."""
        self.adds: list[tuple[str, int, bytes, bool, bytes]] = []
        """(bookie, entry id, bytes, recovery flag, master key) of every add, in the order sent."""
        self.fences: list[tuple[str, bytes]] = []
        """(bookie, master key) of every fencing READ_LAC."""
        self.reads: list[tuple[str, int, int]] = []
        """(bookie, first entry, count) of every READ_ENTRY, in the order sent."""
        self.timeout_s = 1.0

    def __getitem__(self, bookie_id: str) -> FakeBookie:
        return self.bookies[bookie_id]

    def put(self, bookie_id: str, ledger_id: int, entries: dict[int, bytes], lac: int = -1) -> None:
        """Store entries on a bookie directly, as a writer that reached it would have."""
        state = self.bookies[bookie_id].ledgers.setdefault(ledger_id, FakeLedgerState())
        state.entries.update(entries)
        state.lac = max(state.lac, lac)

    def _answer(self, bookie_id: str, make: Any) -> asyncio.Future:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        bookie = self.bookies[bookie_id]

        def complete() -> None:
            if bookie.down:
                future.set_exception(ConnectionClosedError(f"cannot connect to {bookie_id}: Connection refused"))
                return
            try:
                future.set_result(make(bookie))
            except MiniPulsarError as error:
                future.set_exception(error)

        if not bookie.hung:
            asyncio.get_running_loop().call_soon(complete)
        return future

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
        self.requests.append(("add", bookie, ledger_id, entry_id))
        self.adds.append((bookie, entry_id, bytes(payload), recovery, master_key))

        def make(fake: FakeBookie) -> AddEntryResponse:
            if fake.dies_after_adds is not None:
                if fake.dies_after_adds == 0:
                    fake.down = True
                    raise ConnectionClosedError(f"connection to {bookie} lost")
                fake.dies_after_adds -= 1
            state = fake.ledgers.setdefault(ledger_id, FakeLedgerState())
            if state.fenced and not recovery:
                raise LedgerFencedError(f"ledger {ledger_id} is fenced")
            state.entries[entry_id] = bytes(payload)
            state.lac = max(state.lac, lac)
            return AddEntryResponse(id=0, ledger_id=ledger_id, entry_id=entry_id)

        return self._answer(bookie, make)

    def add_entry_then(
        self,
        bookie: str,
        ledger_id: int,
        entry_id: int,
        lac: int,
        head: bytes,
        payload: bytes,
        callback: ResponseCallback,
        *,
        master_key: bytes,
    ) -> None:
        """The ledger handle's form of :meth:`add_entry`: the answer goes to ``callback``."""
        future = self.add_entry(bookie, ledger_id, entry_id, lac, head + payload, master_key=master_key)

        def answered(done: asyncio.Future) -> None:
            error = done.exception()
            callback(None, cast(MiniPulsarError, error)) if error is not None else callback(done.result(), None)

        future.add_done_callback(answered)

    def read_entries(
        self, bookie: str, ledger_id: int, first_entry_id: int, count: int, max_bytes: int = 0
    ) -> asyncio.Future:
        self.requests.append(("read", bookie, ledger_id, first_entry_id))
        self.reads.append((bookie, first_entry_id, count))

        def make(fake: FakeBookie) -> ReadEntryResponse:
            state = fake.ledgers.get(ledger_id)
            if state is None:
                raise NoSuchLedgerError(f"bookie {bookie} has no ledger {ledger_id}")
            if first_entry_id in fake.unreadable:
                raise PersistenceError(f"bookie {bookie}: I/O error reading entry {first_entry_id}")
            found = []
            for entry_id in range(first_entry_id, first_entry_id + count):
                if entry_id not in state.entries:
                    break
                found.append([entry_id, state.entries[entry_id]])
            if not found:
                raise NoSuchEntryError(f"bookie {bookie} has no entry {first_entry_id} of ledger {ledger_id}")
            return ReadEntryResponse(id=0, ledger_id=ledger_id, entries=found, lac=state.lac)

        return self._answer(bookie, make)

    def read_lac(self, bookie: str, ledger_id: int, fence: bool = False, master_key: bytes = b"") -> asyncio.Future:
        self.requests.append(("read_lac", bookie, ledger_id, -1))
        if fence:
            self.fences.append((bookie, master_key))

        def make(fake: FakeBookie) -> ReadLacResponse:
            state = fake.ledgers.get(ledger_id)
            if state is None:
                if not fence:
                    raise NoSuchLedgerError(f"bookie {bookie} has no ledger {ledger_id}")
                state = fake.ledgers[ledger_id] = FakeLedgerState()
            state.fenced = state.fenced or fence
            last = max(state.entries, default=-1)
            return ReadLacResponse(id=0, ledger_id=ledger_id, lac=state.lac, last_entry_id=last)

        return self._answer(bookie, make)

    def outstanding(self, bookie: str) -> int:
        return 0


def fake_context(bookies: FakeBookies, store: MetadataStore, seed: int = 1) -> ClientContext:
    """A client context over ``bookies``; replacements by the default placement policy."""
    policy = DefaultEnsemblePlacementPolicy(random.Random(seed))

    async def replace_bookie(
        ensemble: Sequence[str], index: int, write_quorum: int, ack_quorum: int, exclude: frozenset[str]
    ) -> str:
        view = ClusterView(writable=frozenset(bookies.registered))
        return select_replacement(policy, ensemble, index, write_quorum, ack_quorum, view, exclude)

    return ClientContext(
        bookies=cast(BookieClient, bookies),
        store=store,
        replace_bookie=replace_bookie,
        record_error=lambda bookie, error: None,
        client_add_budget=AddBudget(1 << 30),
    )
