"""Whether the bookie takes adds: BookKeeper's BookieStateManager, for the causes we have.

A bookie turns read-only — adds refused with BookieReadOnly (recovery adds excepted), reads
served, registration under ``/ledgers/available/readonly`` so that brokers place no new
ledgers on it — while any cause holds:

- :data:`LEDGER_DIRS_FULL`: no ledger dir takes new entries, each being full (above
  ``diskUsageThreshold``, or out of space) or failed (I/O errors):
  :mod:`bookie.storage.ledger_dirs_manager`. It clears once a full dir is back (below
  ``diskUsageLwmThreshold`` in total); a failed dir never comes back before a restart;
- an operator's ``PUT /api/v1/bookie/state/readonly`` (until the PUT that clears it), or
  ``forceReadOnlyBookie`` (for good): :mod:`bookie.http_api`.

A failed journal is no cause: the bookie leaves the cluster instead, as BookKeeper's
(:mod:`bookie.bookie_server`).

Invariants:
- :attr:`BookieStateManager.read_only` is a plain attribute (every admission reads it), true
  exactly while :attr:`BookieStateManager.causes` is not empty;
- the listener hears each flip once.
"""

from __future__ import annotations

from collections.abc import Callable

from minipulsar.errors import BookieReadOnlyError

LEDGER_DIRS_FULL = "no writable ledger dir: each is full (diskUsageThreshold, or out of space) or failed"


class BookieStateManager:
    __slots__ = ("_listener", "causes", "read_only")

    def __init__(self, listener: Callable[[bool, str], None] | None = None) -> None:
        """``listener(read_only, reason)``: called on each flip, on the loop."""
        self.read_only = False
        self.causes: dict[str, None] = {}
        """Why adds are refused, oldest first (a dict as an ordered set)."""
        self._listener = listener

    @property
    def reason(self) -> str:
        """Every cause, for error messages and logs ("" while writable)."""
        return "; ".join(self.causes)

    def refusal(self, bookie_id: str) -> BookieReadOnlyError:
        """The error an add refused for being read-only gets, saying why."""
        return BookieReadOnlyError(f"bookie {bookie_id} is read-only: {self.reason}")

    def set_cause(self, cause: str, holds: bool) -> None:
        if holds:
            self.causes[cause] = None
        else:
            self.causes.pop(cause, None)
        read_only = bool(self.causes)
        if read_only != self.read_only:
            self.read_only = read_only
            if self._listener is not None:
                self._listener(read_only, self.reason if read_only else cause)
