"""Test-wide settings: markers by directory, uvloop when MINIPULSAR_UVLOOP=1."""

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


@pytest.fixture(scope="session")
def event_loop_policy():
    if os.environ.get("MINIPULSAR_UVLOOP") == "1":
        import uvloop

        return uvloop.EventLoopPolicy()
    return asyncio.DefaultEventLoopPolicy()
