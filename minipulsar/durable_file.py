"""Durability on disk: a file's data, a directory's entries, a small file replaced whole.

- :func:`sync_data` is the one data sync minipulsar makes: ``fdatasync`` where the platform
  has it (Linux), else ``fsync`` (macOS has no ``fdatasync``; its ``fsync`` leaves the
  drive's own write cache unflushed, which only ``F_FULLFSYNC`` would flush);
- :func:`write_atomically`: after a crash the file holds the old or the new content, whole.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Of the temporary file a crash may leave beside the one being replaced."""


def sync_data(fd: int) -> None:
    """Wait until what was written to ``fd`` is on the device, with what reading it back needs
    (the file's size, its extents): ``fdatasync``, or ``fsync`` where there is none. Blocking.

    Raises:
        OSError: the write-back failed; what was written since the last sync may be lost.
    """
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def fsync_directory(directory: Path) -> None:
    """Make the directory's entries (a rename, a create) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, rename it over ``path``,
    then fsync the directory. Blocking."""
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_directory(path.parent)
