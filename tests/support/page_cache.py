"""How much of a file sits in the page cache (``mincore`` over a read-only mapping), for the
tests of journalRemoveFromPageCache and the entry logs' cache window. Linux only."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_bytes(path: Path) -> int:
    """Bytes of ``path`` whose pages are in the page cache (mapping them faults nothing in)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            pages = -(-size // mmap.PAGESIZE)
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return sum(flag & 1 for flag in vector) * mmap.PAGESIZE
        finally:
            _libc.munmap(address, size)
    finally:
        os.close(fd)
