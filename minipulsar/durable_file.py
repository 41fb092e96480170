"""Replacing a small file so that a crash leaves either the old or the new content, whole."""

from __future__ import annotations

import os
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Of the temporary file a crash may leave beside the one being replaced."""


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
