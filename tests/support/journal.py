"""The journal for tests: requests, a recording sink and store, and adds admitted the way the
bookie admits them (through :meth:`Journal.add`, waiting for room when there is none).

A test tells the journal's outcome from the sink (what completed, in which calls, with which
error) and from a replay of the directory (what is on disk, and where).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from minipulsar.bookie.journal.format import EntryLocation, JournalRecord, LogMark, RecordType
from minipulsar.bookie.journal.group_commit import GroupCommitPolicy
from minipulsar.bookie.journal.journal import Fence, Journal, ReplayResult
from minipulsar.bookie.journal.settings import JournalSettings

KIB = 1024
WAIT_S = 10.0
"""How long a helper waits for a completion before the test fails."""


class Add:
    """An ADD_ENTRY as the journal and the bookie read it (``lac``: the entry before, by default)."""

    __slots__ = ("entry_id", "lac", "ledger_id", "master_key", "payload", "recovery")

    def __init__(
        self,
        ledger_id: int,
        entry_id: int,
        payload: bytes,
        lac: int | None = None,
        recovery: bool = False,
        master_key: bytes = b"",
    ) -> None:
        self.ledger_id, self.entry_id, self.payload = ledger_id, entry_id, payload
        self.lac = entry_id - 1 if lac is None else lac
        self.recovery = recovery
        self.master_key = master_key

    def __repr__(self) -> str:
        return f"Add({self.ledger_id}, {self.entry_id}, {len(self.payload)} bytes)"


@dataclass(frozen=True, slots=True)
class Completion:
    """One ``requests_done`` call."""

    requests: list[Any]
    started: float
    error: BaseException | None


class RecordingSink:
    """A :class:`~bookie.journal.journal.JournalSink` that keeps every call, in order."""

    def __init__(self) -> None:
        self.calls: list[Completion] = []
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []

    def requests_done(self, requests: list[Any], started: float, error: BaseException | None) -> None:
        self.calls.append(Completion(list(requests), started, error))
        for count, future in self._waiting:
            if self.completed >= count and not future.done():
                future.set_result(None)

    @property
    def completed(self) -> int:
        """Requests completed so far, successfully or not."""
        return sum(len(call.requests) for call in self.calls)

    async def wait(self, count: int) -> None:
        """Return once ``count`` requests completed (the test fails after :data:`WAIT_S`)."""
        if self.completed >= count:
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((count, future))
        try:
            await asyncio.wait_for(future, WAIT_S)
        finally:
            self._waiting.remove((count, future))

    def error_of(self, request: Any) -> BaseException | None:
        """The error ``request`` completed with (None: success); it must have completed."""
        for call in self.calls:
            if any(done is request for done in call.requests):
                return call.error
        raise AssertionError(f"{request!r} has not completed")

    def errors(self) -> list[BaseException | None]:
        return [call.error for call in self.calls]


class RecordingStore:
    """An :class:`~bookie.journal.journal.EntryStore` that keeps what the journal gave it."""

    def __init__(self) -> None:
        self.added: list[Any] = []
        self.runs: list[list[Any]] = []
        """Every ``add_entries`` call's requests."""
        self.cancelled: list[int] = []
        """The payload length of every add whose room was given back."""

    def add_entries(self, requests: Sequence[Any]) -> None:
        self.runs.append(list(requests))
        self.added += requests

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None:
        self.cancelled.append(payload_length)


def journal_settings(**overrides: Any) -> JournalSettings:
    """Settings for tests: no group wait and 64 KiB preallocation steps unless overridden."""
    overrides.setdefault("policy", GroupCommitPolicy(max_group_wait_s=0))
    overrides.setdefault("prealloc_bytes", 64 * KIB)
    return JournalSettings(**overrides)


def new_journal(directory: Path, **overrides: Any) -> Journal:
    """A journal of ``directory`` with a :class:`RecordingStore`, neither replayed nor started."""
    journal = Journal(directory, 0, journal_settings(**overrides))
    journal.attach_storage(RecordingStore())
    return journal


async def started_journal(directory: Path, **overrides: Any) -> Journal:
    """:func:`new_journal`, replayed (to append after what is there) and started."""
    journal = new_journal(directory, **overrides)
    journal.replay(lambda *_: None)
    await journal.start()
    return journal


def submit(journal: Journal, sink: RecordingSink, *requests: Add, started: float = 0.0) -> bool:
    """Admit ``requests`` together if the journal has room now (the bookie's hot path)."""
    if not journal.has_room:
        return False
    journal.add(requests, sink, started)
    return True


async def admit(journal: Journal, sink: RecordingSink, request: Add, started: float = 0.0) -> None:
    """Admit one add, waiting for room first if there is none."""
    if not journal.has_room:
        await journal.wait_for_room()
    journal.add([request], sink, started)


async def add_durably(journal: Journal, ledger_id: int, entry_id: int, payload: bytes, lac: int | None = None) -> None:
    """One add, admitted (waiting for room) and completed; raises the error it completed with."""
    sink, request = RecordingSink(), Add(ledger_id, entry_id, payload, lac)
    await admit(journal, sink, request)
    await sink.wait(1)
    if (error := sink.error_of(request)) is not None:
        raise error


async def fence_durably(journal: Journal, ledger_id: int) -> None:
    """One FENCE record, completed; raises the error it completed with."""
    sink = RecordingSink()
    journal.add([Fence(ledger_id)], sink, 0.0, RecordType.FENCE)
    await sink.wait(1)
    if (error := sink.calls[0].error) is not None:
        raise error


async def write(directory: Path, entries: Sequence[tuple[int, int, bytes]], **overrides: Any) -> Journal:
    """A started journal of ``directory`` after each ``(ledger, entry, payload)`` was added in
    turn (each completed before the next); the caller closes it."""
    journal = await started_journal(directory, **overrides)
    for ledger_id, entry_id, payload in entries:
        await add_durably(journal, ledger_id, entry_id, payload)
    return journal


class Replayed(NamedTuple):
    records: list[tuple[JournalRecord, EntryLocation, bytes]]
    """Every record replayed, with where its payload is and the payload."""
    result: ReplayResult

    @property
    def adds(self) -> list[tuple[int, int, bytes]]:
        """The ADD records as ``(ledger, entry, payload)``."""
        return [(r.ledger_id, r.entry_id, p) for r, _, p in self.records if r.type is RecordType.ADD_ENTRY]

    @property
    def locations(self) -> list[EntryLocation]:
        """Where the ADD records' payloads are, in replay order."""
        return [location for r, location, _ in self.records if r.type is RecordType.ADD_ENTRY]


def replay(directory: Path, start: LogMark | None = None) -> Replayed:
    """Replay ``directory`` from ``start`` (None: from its first segment)."""
    records: list[tuple[JournalRecord, EntryLocation, bytes]] = []
    result = Journal(directory, 0, journal_settings()).replay(
        lambda record, location, payload: records.append((record, location, bytes(payload))), start
    )
    return Replayed(records, result)
