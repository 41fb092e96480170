"""Which ledger dirs can take new entries: BookKeeper's ``LedgerDirsManager``.

Each ledger dir is, at any time, one of:

- **writable**;
- **full**: above ``diskUsageThreshold`` by the disk monitor's last reading
  (:mod:`bookie.disk_monitor`, which brings it back by its thresholds and hysteresis), or a
  flush into it failed with ENOSPC / EDQUOT (:meth:`LedgerDirsManager.out_of_space`): then it
  stays full until a retried flush of that dir succeeds (:meth:`LedgerDirsManager.flushed`)
  *and* the monitor's reading says it is not full — so that a disk the monitor misjudges
  (quotas, reserved blocks, inodes) does not flap between full and writable on every retry;
- **failed**: a write or sync of its entry logs or index failed with any other I/O error
  (EIO, EROFS, an SQLite I/O error, ...). It stays failed until the bookie restarts — as
  BookKeeper's failed dirs, whose disk must be looked at — and the monitor no longer reads it.

The ledger storage routes ledger ``L`` to dir ``L mod #dirs`` (``DbLedgerStorage``), so a dir that
is not writable refuses the adds of its ledgers (BookieReadOnly, naming the dir: the writer
replaces this bookie in that ledger's ensemble), while the ledgers of the other dirs are served
as before; reads of every dir go on. Recovery adds pass a full dir (its flush may still fit, as
BookKeeper's high-priority writes) but not a failed one.

BookKeeper stops the whole bookie when one ledger dir fails (``diskFailed`` →
``ExitCode.BOOKIE_EXCEPTION``); here only that dir is taken out of service, and the bookie turns
read-only — or, with ``readOnlyModeEnabled=false``, stops — once no dir is writable.

Invariants (the event loop owns this object):
- :attr:`LedgerDirsManager.writable_flags` ``[i]`` is true exactly when dir ``i`` is neither full
  nor failed (a list, read on every add);
- the listener hears each change of :attr:`LedgerDirsManager.writable` (some dir writable) once,
  and the failure listener each dir's failure once;
- ``bookie_ledger_writable_dirs`` / ``bookie_ledger_num_dirs`` follow the state.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

from minipulsar.bookie import metrics

log = logging.getLogger(__name__)

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13
"""SQLite's primary result code SQLITE_FULL (extended codes keep it in the low byte)."""

WRITABLE, FULL, FAILED = "writable", "full", "failed"


def is_out_of_space(error: BaseException) -> bool:
    """Whether a flush failure means a full disk (the dir is *full*) rather than a failing one."""
    if isinstance(error, OSError):
        return error.errno in NO_SPACE_ERRNOS
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        return code is not None and code & 0xFF == _SQLITE_FULL
    return False


class LedgerDirsManager:
    def __init__(self, dirs: Iterable[str | Path]) -> None:
        """``dirs``: the configured ledger dirs (``ledgerDirectories``), in their order."""
        self.dirs = [Path(d) for d in dirs]
        self.writable_flags = [True] * len(self.dirs)
        self.full: frozenset[Path] = frozenset()
        """Full dirs: the monitor's, and those out of space."""
        self._monitor_full: frozenset[Path] = frozenset()
        self._out_of_space: set[Path] = set()
        """Dirs whose last flush found no space (sticky until one succeeds)."""
        self.failed: dict[Path, str] = {}
        """Failed dirs and why, in the order they failed."""
        self.writable = True
        """At least one ledger dir can take new entries."""
        self.listener: Callable[[bool], None] | None = None
        """Told ``writable`` when it changes."""
        self.failure_listener: Callable[[Path, str], None] | None = None
        """Told ``(dir, why)`` when a dir fails."""
        metrics.LEDGER_NUM_DIRS.set(len(self.dirs))
        metrics.LEDGER_WRITABLE_DIRS.set(len(self.dirs))

    def state(self, directory: Path) -> str:
        return FAILED if directory in self.failed else FULL if directory in self.full else WRITABLE

    def states(self) -> dict[str, str]:
        """Every dir's state (BOOKIE_INFO, ``/api/v1/bookie/info``)."""
        return {str(directory): self.state(directory) for directory in self.dirs}

    @property
    def healthy_dirs(self) -> list[Path]:
        """The dirs not failed (the disk monitor reads these)."""
        return [d for d in self.dirs if d not in self.failed]

    def set_full(self, full: Iterable[Path]) -> None:
        """The disk monitor's verdict: these dirs are above the threshold."""
        self._monitor_full = frozenset(full)
        self._update()

    def out_of_space(self, index: int, error: BaseException) -> None:
        """A flush into dir ``index`` found no space: full until a flush there succeeds (and
        the monitor agrees)."""
        directory = self.dirs[index]
        if directory in self._out_of_space or directory in self.failed:
            return
        log.error("ledger dir %s is out of space (%s): no more adds for its ledgers", directory, error)
        self._out_of_space.add(directory)
        self._update()

    def flushed(self, index: int) -> None:
        """A flush into dir ``index`` succeeded (after one that found no space)."""
        directory = self.dirs[index]
        if directory in self._out_of_space:
            self._out_of_space.discard(directory)
            log.info("ledger dir %s: a flush went through again", directory)
            self._update()

    def dir_failed(self, index: int, error: BaseException) -> None:
        """A write or sync in dir ``index`` failed (not for space): it is failed for good."""
        directory = self.dirs[index]
        if directory in self.failed:
            return
        why = f"{type(error).__name__}: {error}"
        log.error("ledger dir %s failed (%s): no more writes there until the bookie restarts", directory, why)
        self.failed[directory] = why
        self._update()
        if self.failure_listener is not None:
            self.failure_listener(directory, why)

    def refusal_reason(self, index: int) -> str:
        directory = self.dirs[index]
        if directory in self.failed:
            return f"ledger dir {directory} failed ({self.failed[directory]})"
        return f"ledger dir {directory} is full"

    def _update(self) -> None:
        self.full = self._monitor_full | self._out_of_space
        flags = [d not in self.full and d not in self.failed for d in self.dirs]
        self.writable_flags[:] = flags
        metrics.LEDGER_WRITABLE_DIRS.set(sum(flags))
        writable = any(flags)
        if writable != self.writable:
            self.writable = writable
            if self.listener is not None:
                self.listener(writable)
