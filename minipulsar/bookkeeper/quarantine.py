"""Client-side bookie quarantine: keep new ledgers off a bookie that keeps failing requests.

BookKeeper's rule (``BookKeeper.checkForFaultyBookies``), as Pulsar sets it:

- every failed request to a bookie whose error is not *expected* (:func:`counts_toward_quarantine`)
  adds one to that bookie's error counter;
- every ``bookkeeperClientHealthCheckIntervalSeconds`` (60) one health-check pass
  (:meth:`BookieQuarantine.check`) takes and resets all counters; each bookie with at least
  ``bookkeeperClientHealthCheckErrorThresholdPerInterval`` (5) errors is *faulty*;
- a faulty bookie is quarantined for ``bookkeeperClientHealthCheckQuarantineTimeInSeconds``
  (1800) with probability ``bookkeeperClientQuarantineRatio`` (BookKeeper PR 2327, BIGO; 1.0
  is the classic rule). With many brokers seeing the same overloaded bookie, the classic rule
  makes all of them lock it out in the same minute and let it back in the same minute, so its
  load swings on and off with the quarantine period; with ratio p only about p of them do at
  each pass, and their releases spread out too.

Invariants:

- quarantine only steers placement (new ensembles and replacements avoid the bookie, see
  placement.select_ensemble): reads and writes to existing ledgers continue, and their errors
  keep counting;
- a bookie already in quarantine keeps its expiry: being faulty again neither extends it nor
  rolls the dice (BookKeeper's ``quarantineBookie`` is a no-op for a present entry);
- nothing here does I/O or awaits; time comes from the injected ``clock`` and chance from the
  injected ``rng``, so brokers can be simulated (bench/quarantine_sim.py).

Which errors count (BookKeeper counts every error except BookieHandleNotAvailable,
NoSuchEntry, NoSuchLedgerExists, LedgerFenced, LedgerExist, DuplicateEntryId and
WriteOnReadOnlyBookie):

- not counted: :class:`NoSuchEntryError`, :class:`NoSuchLedgerError`, :class:`LedgerFencedError`,
  :class:`BookieReadOnlyError` (answers about ledgers, not bookie health), and anything that
  is not an ``Exception`` (``asyncio.CancelledError``: we gave up, the bookie did not fail);
- counted: timeouts (:class:`RequestTimeoutError`), :class:`TooManyRequestsError` (the bookie
  sheds load: exactly the overload quarantine is meant to relieve, and BookKeeper counts it
  too), every other server error and unexpected exception;
- connection failures (:class:`ConnectionClosedError`, ``ConnectionError``) count only with
  ``connection_errors_count=True`` (BookKeeper's ``bookieConnectionErrorQuarantineEnabled``,
  default false): a restarting bookie is not a faulty one, and it leaves the registry anyway.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable

from minipulsar.bookkeeper.metrics import BOOKIE_QUARANTINE, BOOKIE_QUARANTINE_SKIP, QUARANTINED_BOOKIES
from minipulsar.errors import (
    BookieReadOnlyError,
    ConnectionClosedError,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
)

logger = logging.getLogger(__name__)

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    NoSuchEntryError,
    NoSuchLedgerError,
    LedgerFencedError,
    BookieReadOnlyError,
)
"""Answers that say nothing about the bookie's health."""
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (ConnectionClosedError, ConnectionError)


def counts_toward_quarantine(error: BaseException, *, connection_errors_count: bool = False) -> bool:
    """Whether ``error`` from a bookie adds to its error counter (module docstring)."""
    if not isinstance(error, Exception) or isinstance(error, EXPECTED_ERRORS):
        return False
    if isinstance(error, CONNECTION_ERRORS):
        return connection_errors_count
    return True


class BookieQuarantine:
    """One BookKeeper client's error counters and quarantine (module docstring).

    Invariant: a bookie is quarantined exactly while ``clock() < expiry``; :meth:`check` is
    the only place a bookie enters quarantine, and counters only grow between two checks.
    """

    def __init__(
        self,
        *,
        error_threshold_per_interval: int,
        quarantine_time_s: float,
        quarantine_ratio: float,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        connection_errors_count: bool = False,
    ) -> None:
        if error_threshold_per_interval < 1:
            raise ValueError(f"error_threshold_per_interval must be >= 1, got {error_threshold_per_interval}")
        if quarantine_time_s < 0:
            raise ValueError(f"quarantine_time_s must be >= 0, got {quarantine_time_s}")
        if not 0.0 <= quarantine_ratio <= 1.0:
            raise ValueError(f"quarantine_ratio must be within 0..1, got {quarantine_ratio}")
        self.error_threshold_per_interval = error_threshold_per_interval
        self.quarantine_time_s = quarantine_time_s
        self.quarantine_ratio = quarantine_ratio
        self.connection_errors_count = connection_errors_count
        self._rng = rng or random.Random()
        self._clock = clock
        self._errors: Counter[str] = Counter()
        self._expiry_s: dict[str, float] = {}

    def record_error(self, bookie: str, error: BaseException) -> None:
        """Counts a failed request to ``bookie`` if ``error`` is one that counts."""
        if counts_toward_quarantine(error, connection_errors_count=self.connection_errors_count):
            self._errors[bookie] += 1

    def check(self) -> list[str]:
        """One health-check pass: take and reset every counter, quarantine faulty bookies by chance.

        Returns:
            The bookies quarantined by this pass, sorted.
        """
        errors, self._errors = self._errors, Counter()
        faulty = sorted(bookie for bookie, count in errors.items() if count >= self.error_threshold_per_interval)
        already = self.quarantined()
        newly: list[str] = []
        for bookie in faulty:
            if bookie in already:
                continue
            # random() is in [0, 1): ratio 1.0 always quarantines, 0.0 never does.
            if self._rng.random() < self.quarantine_ratio:
                self._expiry_s[bookie] = self._clock() + self.quarantine_time_s
                BOOKIE_QUARANTINE.inc()
                newly.append(bookie)
                logger.info(
                    "bookie %s quarantined for %.0f s: %d errors in the last health-check interval",
                    bookie,
                    self.quarantine_time_s,
                    errors[bookie],
                )
            else:
                BOOKIE_QUARANTINE_SKIP.inc()
                logger.info(
                    "bookie %s faulty (%d errors) but not quarantined (bookkeeperClientQuarantineRatio=%s)",
                    bookie,
                    errors[bookie],
                    self.quarantine_ratio,
                )
        if newly:
            QUARANTINED_BOOKIES.set(len(self._expiry_s))
        return newly

    def quarantined(self) -> frozenset[str]:
        """The bookies in quarantine now (expired ones are released here)."""
        now_s = self._clock()
        expired = [bookie for bookie, expiry_s in self._expiry_s.items() if expiry_s <= now_s]
        for bookie in expired:
            del self._expiry_s[bookie]
            logger.info("bookie %s released from quarantine", bookie)
        QUARANTINED_BOOKIES.set(len(self._expiry_s))
        return frozenset(self._expiry_s)

    def is_quarantined(self, bookie: str) -> bool:
        return bookie in self.quarantined()

    def remaining_s(self) -> dict[str, float]:
        """Each bookie in quarantine now → seconds until it is released (for the admin API)."""
        now_s = self._clock()
        return {bookie: self._expiry_s[bookie] - now_s for bookie in sorted(self.quarantined())}

    def release_all(self) -> None:
        """Ends every quarantine (BookKeeper does this when the health check is disabled cluster-wide)."""
        self._expiry_s.clear()
        QUARANTINED_BOOKIES.set(0)
