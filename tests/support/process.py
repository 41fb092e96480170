"""Real server processes for tests: start, wait for READY, stop (TERM, then KILL), always.

Every child runs ``python -m minipulsar <role> ...``, prints ``READY <role> host:port
[http=host:port]`` once it serves, and logs to a file in the test's temp dir; the tail of that
log is attached to failures.

A port given as 0 is picked here, below the kernel's ephemeral range
(:func:`restart_safe_port`), not by the child: a process that restarts on its port (a killed
broker, a bookie keeping its id) would otherwise find it taken, between the kill and the
restart, as the source port of some outgoing connection.

A child's ERROR is a test's business as much as the test process's own: every started process
is remembered, and :func:`new_child_error_records` hands the conftest each ERROR or CRITICAL
line a project logger wrote since it last asked (a test that provokes one on purpose says so
with ``expect_error_log``, as for its own records).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
ERROR_LINE = re.compile(r"^\S+ \S+ (?:ERROR|CRITICAL)\s+((?:minipulsar|asyncio)[\w.]*): (.*)$")
"""A log line of the servers' format (``minipulsar/cli/common.py``) at ERROR or above, from one
of our loggers: (logger, message)."""
LOG_LINE_START = re.compile(r"^\d{4}-\d\d-\d\d \d")
TRACEBACK_LINES_KEPT = 12
PORT_FLAGS = ("--port", "--http-port")
LOWEST_PICKED_PORT = 20000


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _worker_block(low: int) -> range:
    """This test process's share of [LOWEST_PICKED_PORT, low): one block per pytest-xdist
    worker, so that workers never pick the same port."""
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % count
    size = (low - LOWEST_PICKED_PORT) // count
    start = LOWEST_PICKED_PORT + index * size
    return range(start, start + size)


_next_pick: dict[int, int] = {}
_pick_lock = threading.Lock()  # clusters start their servers from several threads at once


def restart_safe_port(host: str = "127.0.0.1", attempts: int = 200) -> int:
    """A port free on ``host`` now and outside the ephemeral range, so that no outgoing
    connection takes it while its server is down. Each xdist worker hands out its own block
    in turn (a port comes round again only after the whole block), so two servers of one run
    never race for a port; 0 (the OS's choice) if the range is too small or all busy."""
    low, _ = _ephemeral_range()
    block = _worker_block(low)
    if len(block) < 500:
        return 0
    with _pick_lock:
        offset = _next_pick.setdefault(block.start, random.randrange(len(block)))
        for step in range(attempts):
            port = block[(offset + step) % len(block)]
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((host, port))
                except OSError:
                    continue
            _next_pick[block.start] = offset + step + 1
            return port
    return 0


def _with_picked_ports(args: list[str]) -> list[str]:
    picked = list(args)
    for flag in PORT_FLAGS:
        if flag in picked and picked[picked.index(flag) + 1] == "0":
            picked[picked.index(flag) + 1] = str(restart_safe_port())
    return picked


@dataclass
class ServerProcess:
    """One ``minipulsar`` server child process."""

    role: str
    args: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    host: str = ""
    port: int = 0
    http_port: int = 0
    _log_read_bytes: int = 0
    """How far :meth:`new_error_records` has read the log."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        scheme = {"broker": "pulsar", "metastore": "metastore"}.get(self.role, "tcp")
        return f"{scheme}://{self.address}"

    def start(self, ready_timeout_s: float = READY_TIMEOUT_S) -> ServerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "ab")  # noqa: SIM115 -- the child's stdout, closed when it ends
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.args = _with_picked_ports(self.args)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minipulsar", self.role, *self.args],
            stdout=subprocess.PIPE,
            stderr=log_file,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        log_file.close()
        _STARTED.append(self)
        self._wait_ready(ready_timeout_s)
        return self

    def start_on_same_port(self, ready_timeout_s: float = READY_TIMEOUT_S) -> ServerProcess:
        """Start again (after a stop or kill) on the port it had, so its clients reconnect."""
        assert self.port, "never started"
        args = list(self.args)
        args[args.index("--port") + 1] = str(self.port)
        self.args = args
        return self.start(ready_timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        stdout, buffer = self.proc.stdout, b""
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([stdout], [], [], min(remaining, 0.5))
            if readable:
                chunk = os.read(stdout.fileno(), 65536)
                buffer += chunk
                for line in buffer.decode(errors="replace").splitlines():
                    if line.startswith(f"READY {self.role} "):
                        self._parse_ready(line)
                        return
                if chunk:
                    continue
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.role} exited with {self.proc.returncode}\n{self.log_tail()}")
        self.kill()
        raise TimeoutError(f"{self.role} not ready within {timeout_s}s\n{self.log_tail()}")

    def _parse_ready(self, line: str) -> None:
        parts = line.split()
        self.host, port = parts[2].rsplit(":", 1)
        self.port = int(port)
        for part in parts[3:]:
            if part.startswith("http="):
                self.http_port = int(part.rsplit(":", 1)[1])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (after a SIGCONT, in case a test left it paused), wait, then SIGKILL;
        returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipes()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the process group (no clean shutdown) and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT_S)
        self._close_pipes()

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def new_error_records(self) -> list[tuple[str, str]]:
        """(logger, message with its traceback) of each ERROR line logged since the last call."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_read_bytes)
                text = log.read()
        except OSError:
            return []
        complete = text[: text.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self._log_read_bytes += len(complete)
        records: list[tuple[str, str]] = []
        for line in complete.decode(errors="replace").splitlines():
            if (match := ERROR_LINE.match(line)) is not None:
                records.append((match.group(1), match.group(2)))
            elif records and not LOG_LINE_START.match(line) and records[-1][1].count("\n") < TRACEBACK_LINES_KEPT:
                records[-1] = (records[-1][0], f"{records[-1][1]}\n{line}")  # its traceback
        return records

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(text.splitlines()[-lines:])


_STARTED: list[ServerProcess] = []
"""Every process started in this test session, in order."""


def new_child_error_records() -> list[tuple[str, str]]:
    """The ERROR records every started process logged since the last call, as
    ``(f"{role} {logger}", message)``; processes that ended and were read to the end are
    forgotten."""
    records = [(f"{p.role} {logger}", message) for p in _STARTED for logger, message in p.new_error_records()]
    _STARTED[:] = [p for p in _STARTED if p.running]
    return records


@contextlib.contextmanager
def running(*processes: ServerProcess) -> Iterator[Sequence[ServerProcess]]:
    """Start ``processes`` in order and always stop them, in reverse, even on failure."""
    started: list[ServerProcess] = []
    try:
        for process in processes:
            started.append(process)
            process.start()
        yield processes
    finally:
        for process in reversed(started):
            process.stop()


async def wait_for(predicate, timeout_s: float = 10.0, interval_s: float = 0.05, message: str = "") -> None:
    """Poll an (async or sync) predicate until true; fail with ``message`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(message or f"condition not met within {timeout_s}s")
        await asyncio.sleep(interval_s)


@contextlib.asynccontextmanager
async def started(*processes: ServerProcess) -> AsyncIterator[Sequence[ServerProcess]]:
    """Async form of :func:`running` (starts in a thread so the test loop keeps turning)."""
    done: list[ServerProcess] = []
    try:
        for process in processes:
            done.append(process)
            await asyncio.to_thread(process.start)
        yield processes
    finally:
        for process in reversed(done):
            await asyncio.to_thread(process.stop)
