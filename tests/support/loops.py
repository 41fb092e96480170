"""Event loops to run a test on: the net layer's tests run on both asyncio's loop and uvloop."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest


def every_event_loop(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """A ``pytest_asyncio_loop_factories`` hook: each async test runs once per event loop;
    ``MINIPULSAR_UVLOOP=1`` (or ``0``) picks one."""
    choice = os.environ.get("MINIPULSAR_UVLOOP")
    factories: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {}
    if choice != "1":
        factories["asyncio"] = asyncio.new_event_loop
    if choice != "0":
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories
