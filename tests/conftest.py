"""Test-wide settings: markers by directory; uvloop when MINIPULSAR_UVLOOP=1."""

from __future__ import annotations

import asyncio
import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.parts
        if "unit" in parts:
            item.add_marker(pytest.mark.unit)
        elif "integration" in parts:
            item.add_marker(pytest.mark.cluster)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item):
    if os.environ.get("MINIPULSAR_UVLOOP") == "1":
        import uvloop

        return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}
