"""Event-loop choice and process-level tuning shared by every entry point."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# glibc mallopt parameters: with ~100 KiB frames, default malloc thresholds made runs randomly
# 5x slower here (docs/design.md §6); big buffers go straight to mmap and are not trimmed back eagerly.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def uvloop_wanted() -> bool:
    """uvloop wherever it is installed, unless ``MINIPULSAR_UVLOOP=0``."""
    if os.environ.get("MINIPULSAR_UVLOOP", "1") == "0":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop() -> asyncio.AbstractEventLoop:
    if uvloop_wanted():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop where available."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


def tune_malloc() -> None:
    """Raise glibc's mmap/trim thresholds (no-op off glibc)."""
    path = ctypes.util.find_library("c")
    if not path:
        return
    try:
        libc = ctypes.CDLL(path)
        libc.mallopt(_M_MMAP_THRESHOLD, 16 * 1024 * 1024)
        libc.mallopt(_M_TRIM_THRESHOLD, 64 * 1024 * 1024)
    except (OSError, AttributeError):
        pass
