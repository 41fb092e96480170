"""Test-wide settings.

- Markers by directory: ``tests/unit`` (pure logic, no sockets), ``tests/component`` (servers
  in-process on 127.0.0.1), ``tests/cluster`` (real processes), ``tests/faults`` (real
  processes killed, paused, starved of disk or fed garbage).
- uvloop when ``MINIPULSAR_UVLOOP=1``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest

pytest_plugins = ["tests.support.fixtures"]

KINDS = ("unit", "component", "cluster", "faults")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = config.rootpath / "tests"
    for item in items:
        kind = item.path.relative_to(tests).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"{item.path}: a test lives in one of tests/{{{','.join(KINDS)}}}/")
        item.add_marker(getattr(pytest.mark, kind))


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    if os.environ.get("MINIPULSAR_UVLOOP") == "1":
        import uvloop

        return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}
