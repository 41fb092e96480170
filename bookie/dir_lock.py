"""An exclusive lock on each of the bookie's directories, held for the life of the process.

Two bookie processes on one journal or ledger dir would corrupt it. The lock also lets a
restarted bookie trust that a registration carrying its own instance id was left by a dead
process: a live one would still hold these locks.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from minipulsar.errors import MiniPulsarError

LOCK_FILE = ".bookie.lock"


class DirectoryInUseError(MiniPulsarError):
    """Another process holds the lock of one of the bookie's directories."""


class DirectoryLocks:
    def __init__(self) -> None:
        self._fds: list[int] = []

    def acquire(self, directories: list[Path]) -> None:
        """Lock every directory (blocking file I/O: call it from a worker thread).

        Raises:
            DirectoryInUseError: a directory is locked by another process.
        """
        for directory in directories:
            path = directory / LOCK_FILE
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self.release()
                raise DirectoryInUseError(f"{directory} is in use by another bookie process") from None
            self._fds.append(fd)

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
