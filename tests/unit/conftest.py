"""Unit tests are pure logic: no network socket and no child process (asyncio's own
socketpair for waking its loop is not a network socket)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

NETWORK_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class NotAUnitTest(AssertionError):
    """A unit test opened a network socket or started a process: it belongs in
    tests/component/ or tests/cluster/."""


@pytest.fixture(autouse=True)
def no_sockets_or_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_bind, real_connect = socket.socket.bind, socket.socket.connect

    def bind(self: socket.socket, address: Any) -> None:
        if self.family in NETWORK_FAMILIES:
            raise NotAUnitTest(f"bind({address!r}) in a unit test")
        real_bind(self, address)

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in NETWORK_FAMILIES:
            raise NotAUnitTest(f"connect({address!r}) in a unit test")
        real_connect(self, address)

    def popen(*args: Any, **kwargs: Any) -> None:
        raise NotAUnitTest(f"subprocess {args[1] if len(args) > 1 else kwargs.get('args')!r} in a unit test")

    monkeypatch.setattr(socket.socket, "bind", bind)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    yield
