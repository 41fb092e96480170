"""A peer's server process (redis-server, nats-server): start on a free loopback port, wait
until it accepts connections, always stop it (TERM, then KILL), log to a file."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A port nothing listens on right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def running_server(argv: list[str], port: int, log_path: Path) -> Iterator[subprocess.Popen]:
    """Run ``argv``; yield once ``port`` accepts connections; stop it on the way out.

    Raises:
        RuntimeError: the server exited, or did not listen within :data:`READY_TIMEOUT_S`
            (the message ends with the tail of its log).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _accepts(port):
            if process.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited with {process.returncode}: {_tail(log_path)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} not listening on {port} within {READY_TIMEOUT_S} s: {_tail(log_path)}")
            time.sleep(0.05)  # polling a port with a deadline
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(STOP_TIMEOUT_S)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
