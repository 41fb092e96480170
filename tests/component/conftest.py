"""Component tests run their servers in the test process: no child process."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.bookie_service import memory_store_url


class NotAComponentTest(AssertionError):
    """A component test started a process: it belongs in tests/cluster/ or tests/faults/."""


@pytest.fixture(autouse=True)
def no_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def popen(*args: Any, **kwargs: Any) -> None:
        raise NotAComponentTest(f"subprocess {args[1] if len(args) > 1 else kwargs.get('args')!r} in a component test")

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    yield


@pytest.fixture
def store_url() -> str:
    """A fresh ``memory://`` metadata store for the test's in-process servers."""
    return memory_store_url()
