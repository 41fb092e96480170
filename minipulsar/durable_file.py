"""Durability on disk: a file's data, a directory's entries, a small file replaced whole.

- :func:`sync_data` is the one data sync minipulsar makes: ``fdatasync`` where the platform
  has it (Linux), else ``fsync`` (macOS has no ``fdatasync``; its ``fsync`` leaves the
  drive's own write cache unflushed, which only ``F_FULLFSYNC`` would flush);
- :func:`write_atomically`: after a crash the file holds the old or the new content, whole;
- :func:`make_dirs`: ``mkdir -p`` whose new directories survive a power loss: each is fsynced
  into its parent (a file's own fsync never makes its directory's entry durable, and a
  directory lost with its entry loses everything in it, synced or not).
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


def make_dirs(directory: Path) -> None:
    """Create ``directory`` and any missing parents, each made durable in its parent (fsync
    of the parent after each mkdir) before anything is created inside it. Blocking."""
    missing = []
    path = Path(directory)
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:  # created meanwhile: its creator syncs it
            if not path.is_dir():
                raise
        fsync_directory(path.parent)


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
