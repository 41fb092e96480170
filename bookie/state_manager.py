"""Whether the bookie takes adds: BookKeeper's BookieStateManager, for the causes we have.

A bookie turns read-only — adds refused with BookieReadOnly (recovery adds excepted), reads
served, registration under ``/ledgers/available/readonly`` so that brokers place no new
ledgers on it — while any cause holds:

- :data:`LEDGER_DIRS_FULL`: every ledger dir is above ``diskUsageThreshold``
  (:mod:`bookie.disk_monitor`); it clears below ``diskUsageLwmThreshold``;
- a failed journal (:func:`journal_failed`): its writer thread stopped after an I/O error
  (a full or failing journal disk), and with its file position unknown that journal takes no
  more records until the bookie restarts and replays it. BookKeeper shuts the bookie down
  then; here it stays up to serve what it stores, and says why it refuses adds;
- an operator's ``PUT /api/v1/bookie/state/readonly`` (until the PUT that clears it), or
  ``forceReadOnlyBookie`` (for good): :mod:`bookie.http_api`.

Invariants:
- :attr:`BookieStateManager.read_only` is a plain attribute (every admission reads it), true
  exactly while :attr:`BookieStateManager.causes` is not empty;
- the listener hears each flip once.
"""

from __future__ import annotations

from collections.abc import Callable

from minipulsar.errors import BookieReadOnlyError

LEDGER_DIRS_FULL = "every ledger dir is above diskUsageThreshold"


def journal_failed(index: int, error: BaseException) -> str:
    return f"journal {index} failed ({error}); it takes no more records until the bookie restarts"


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
