"""Offline damage to a file's tail, done on the backing dir after a power cut (the faults
behind Jepsen's NATS 2.12 findings): a torn last write, or bits flipped in the last bytes.

"The tail" is the end of the file's data: journal segments are preallocated, so their
physical end is zeros; :func:`data_end` finds the last non-zero byte. A tear in a
preallocated file leaves zeros where the lost bytes were (the blocks were allocated; only
their data did not make it); elsewhere it shortens the file.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

_CHUNK_BYTES = 1 << 20


def data_end(path: Path | str) -> int:
    """The offset just past the last non-zero byte of the file (0 if it is all zeros)."""
    with open(path, "rb") as stream:
        end = stream.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - _CHUNK_BYTES)
            stream.seek(start)
            chunk = stream.read(end - start).rstrip(b"\0")
            if chunk:
                return start + len(chunk)
            end = start
    return 0


def tear_tail(path: Path | str, nbytes: int) -> tuple[int, int]:
    """Lose the last ``nbytes`` of the file's data; returns the torn range ``(start, end)``."""
    end = data_end(path)
    start = max(0, end - nbytes)
    size = os.path.getsize(path)
    with open(path, "r+b") as stream:
        if end == size:
            stream.truncate(start)
        else:
            stream.seek(start)
            stream.write(bytes(end - start))
    return start, end


def flip_bits(path: Path | str, rng: random.Random, count: int = 1, window_bytes: int = 4096) -> list[int]:
    """Flip ``count`` random bits among the last ``window_bytes`` of the file's data; returns
    the offsets of the bytes changed."""
    end = data_end(path)
    if end == 0:
        return []
    start = max(0, end - window_bytes)
    offsets = sorted(rng.randrange(start, end) for _ in range(count))
    with open(path, "r+b") as stream:
        for offset in offsets:
            stream.seek(offset)
            byte = stream.read(1)[0] ^ (1 << rng.randrange(8))
            stream.seek(offset)
            stream.write(bytes([byte]))
    return offsets
