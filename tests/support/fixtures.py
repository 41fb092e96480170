"""Fixtures shared by the cluster and fault tests (a plugin of tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.support.process import ServerProcess, started


@pytest_asyncio.fixture
async def metastore(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A real ``metastore`` process on a free port, with its data in the test's tmp dir."""
    process = ServerProcess(
        "metastore", ["--port", "0", "--data-dir", str(tmp_path / "metastore")], tmp_path / "logs" / "metastore.log"
    )
    async with started(process):
        yield process
