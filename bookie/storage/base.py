"""The ledger-storage interface: what the bookie needs from wherever entries live.

The order of an add, which every implementation relies on:

1. admission, on the loop: :meth:`LedgerStorage.try_admit` (or ``await admit``) reserves room
   in the write cache *before* the journal write — an add the journal made durable must
   never find the storage full;
2. the journal makes the record durable;
3. the journal's group completion, on the loop, calls :meth:`LedgerStorage.add_entries`, and
   only then is the add acknowledged. (:meth:`LedgerStorage.cancel_admission` gives the room
   back when step 2 fails or the add is refused.)

Checkpoints (see :mod:`bookie.storage.checkpoint`) rely on step 3 running in journal order on
the loop. At start, :meth:`LedgerStorage.open` returns the checkpoint to replay the journals
from, replayed records go in through :meth:`replay_entry` / :meth:`fence`, and
:meth:`replay_completed` checkpoints them before the bookie serves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from minipulsar.bookie.storage.checkpoint import Checkpoint
from minipulsar.bookie.storage.ledger_state import LedgerState


class LedgerStorage(ABC):
    """Entries and per-ledger state. Methods run on the event loop unless they say otherwise."""

    no_space_listener: Callable[[], None] | None = None
    """Called on the loop when a flush failed for lack of space (ENOSPC, EDQUOT): the disk
    monitor then checks the dirs at once instead of at its next round (BookKeeper's
    LedgerDirsListener.diskFull), so the bookie turns read-only before more adds pile up."""

    # -- start-up and shutdown ----------------------------------------------------------------

    @abstractmethod
    def open(self) -> Checkpoint:
        """Blocking, before the replay: open files; returns the checkpoint to replay from."""

    @abstractmethod
    def replay_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        """Blocking (replay thread): a journal record replayed from after the checkpoint."""

    @abstractmethod
    def replay_completed(self, checkpoint: Checkpoint) -> None:
        """Blocking: the journals were replayed up to ``checkpoint``; make it the new checkpoint."""

    @abstractmethod
    async def start(self) -> None:
        """Ready to serve (after the replay): periodic checkpoints start."""

    @abstractmethod
    async def close(self) -> None:
        """Checkpoint what is cached, release files and threads; nothing is served afterwards."""

    # -- adds and fences ------------------------------------------------------------------------

    @abstractmethod
    def try_admit(self, ledger_id: int, payload_length: int, recovery: bool = False) -> bool:
        """Reserve write-cache room for an add; False when there is none now (then ``await admit``).

        Raises:
            BookieReadOnlyError: the ledger's dir takes no adds (full, or failed; a ``recovery``
                add passes a full dir).
        """

    def try_admit_all(self, ledger_ids: set[int], payload_bytes: int, entries: int) -> bool:
        """Reserve room for several adds of ``ledger_ids`` at once (``payload_bytes`` in all), or
        for none: False means "admit them one by one" (the default: never together)."""
        return False

    @abstractmethod
    async def admit(
        self, ledger_id: int, payload_length: int, recovery: bool = False, since: float | None = None
    ) -> None:
        """Wait (first come, first served) for room, and reserve it. ``since``: when the add
        arrived (``time.monotonic()``), if it already waited; the storage's bound counts from then.

        Raises:
            TooManyRequestsError: no room within the storage's bound (dbStorage_maxThrottleTimeMs).
            BookieReadOnlyError: refused by :meth:`refuse_waiting` (never a ``recovery`` add), or
                the ledger's dir takes no adds (as :meth:`try_admit`).
        """

    def refuse_waiting(self, error: Callable[[], BaseException]) -> int:
        """Refuse the adds waiting in :meth:`admit`, each with a new ``error()``, recovery adds
        excepted (the bookie turned read-only); returns how many. The default: nobody waits."""
        return 0

    @abstractmethod
    def cancel_admission(self, ledger_id: int, payload_length: int, entries: int = 1) -> None:
        """Give back the room of admitted adds (``entries`` of them, ``payload_length`` bytes in
        all) that will not reach :meth:`add_entries`."""

    @abstractmethod
    def add_entries(self, requests: Sequence[Any]) -> None:
        """Store a run of admitted adds that the journal made durable (each with
        ``ledger_id``, ``entry_id``, ``lac`` and ``payload``), in order.

        Adding an entry that exists replaces it (an idempotent retry, or ledger recovery
        re-writing the same bytes).
        """

    @abstractmethod
    def fence(self, ledger_id: int) -> bool:
        """Mark the ledger fenced, creating it if unknown; True if it was not fenced before."""

    @abstractmethod
    def set_master_key(self, ledger_id: int, master_key: bytes) -> bool:
        """Record the ledger's master key, creating it if unknown, unless it has one already
        (the first key stays); True if it had none."""

    @abstractmethod
    def ledger(self, ledger_id: int) -> LedgerState | None:
        """The ledger's state, None for a ledger this bookie never saw."""

    # -- reads ----------------------------------------------------------------------------------

    @abstractmethod
    def read_entries(self, ledger_id: int, first_entry_id: int, count: int, max_bytes: int) -> list:
        """Blocking and thread-safe: up to ``count`` consecutive entries from ``first_entry_id``
        as ``(entry_id, payload)``.

        Stops at the first missing entry and before the payloads pass ``max_bytes`` (the first
        entry is always returned).

        Raises:
            NoSuchLedgerError: the ledger is unknown here.
            NoSuchEntryError: ``first_entry_id`` is not stored here.
        """

    @property
    @abstractmethod
    def ledger_count(self) -> int: ...

    @property
    @abstractmethod
    def entry_count(self) -> int: ...
