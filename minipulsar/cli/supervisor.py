"""Server child processes of the standalone launcher: start in order, wait for READY, stop.

A child is a ``python -m minipulsar <role> ...`` process. Invariants:

- a child counts as started only once its ``READY <role> host:port`` line arrived on stdout
  (common.announce_ready); a child that exits or stays silent past its deadline fails the start
  with an error naming it and quoting the tail of its log;
- a child never outlives the launcher: ``PR_SET_PDEATHSIG`` makes the kernel send it SIGTERM
  when the launcher dies, even by SIGKILL (Linux only; elsewhere the launcher's own shutdown
  is the only guarantee);
- with ``own_process_group`` (the launcher sets it when a terminal is attached) a child leads
  its own process group, so the SIGINT a terminal sends to its foreground group on Ctrl-C
  reaches the launcher only, and the launcher stops the children in order (broker before
  bookies before the metastore) instead of all of them racing each other. Otherwise children
  stay in the launcher's group, so killing that group (what test harnesses and process
  managers do to kill a service outright) kills the whole cluster at once, like a power cut;
- stopping escalates SIGTERM → deadline → SIGKILL and always reaps the child.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from minipulsar.cli.common import EXIT_FAILURE

log = logging.getLogger("minipulsar.standalone")

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
"""Per child. A broker closes its topics and a bookie flushes its journal on SIGTERM."""
LOG_TAIL_LINES = 25

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

MINIPULSAR = (sys.executable, "-m", "minipulsar")
"""The command a child runs, before its role and arguments (tests substitute fake servers)."""


def describe_exit(code: int | None) -> str:
    """``exit code 3`` / ``killed by SIGKILL`` (asyncio reports a signal death as -signum)."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code == EXIT_FAILURE:
        return f"exit code {code} (BOOKIE_EXCEPTION: it stopped itself on a failure, a failed journal or disk)"
    return f"exit code {code}"


class ChildFailedError(Exception):
    """A child exited, or did not become ready in time. The message names it and quotes its log."""


@dataclass(frozen=True, slots=True)
class ReadyLine:
    """What a server announced on stdout: ``READY <role> host:port [http=host:port]``."""

    role: str
    host: str
    port: int
    http: tuple[str, int] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, line: str) -> ReadyLine | None:
        """The READY line's fields, or None for any other line (or a malformed one)."""
        parts = line.split()
        if len(parts) < 3 or parts[0] != "READY":
            return None
        try:
            host, port = _split_address(parts[2])
            http = next((_split_address(p[5:]) for p in parts[3:] if p.startswith("http=")), None)
        except ValueError:
            return None
        return cls(parts[1], host, port, http)


def _split_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(text)
    return host, int(port)


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once here: a preexec_fn runs between fork and exec, where loading a library is unsafe.
_PRCTL = _load_prctl()


def die_with_parent(own_process_group: bool = False) -> Callable[[], None]:
    """A ``preexec_fn`` asking the kernel to SIGTERM the child when this process dies, and
    (``own_process_group``) making the child lead a process group of its own.

    The death signal follows the *thread* that forked, so children must be spawned from the
    thread that lives as long as the launcher (the event loop's, which is the main thread).
    The group is set here rather than with ``process_group=`` because uvloop's subprocess
    support lacks that argument.
    """
    prctl, parent_pid = _PRCTL, os.getpid()

    def preexec() -> None:
        if own_process_group:
            os.setpgid(0, 0)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
            if os.getppid() != parent_pid:  # the launcher died before prctl took effect
                os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class Child:
    """One server process. ``start()`` returns once it is READY; ``stop()`` always reaps it."""

    def __init__(
        self,
        name: str,
        role: str,
        args: list[str],
        log_path: Path,
        program: Sequence[str] = MINIPULSAR,
        own_process_group: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name, self.role, self.args, self.log_path = name, role, args, log_path
        self.program, self.own_process_group = tuple(program), own_process_group
        self.env = dict(env or {})
        """Set in the child's environment over the launcher's own."""
        self.ready: ReadyLine | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._exited: asyncio.Task[int] | None = None
        self._drain: asyncio.Task[None] | None = None
        self._log_offset = 0  # where this run's part of the (appended-to) log starts

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc else None

    @property
    def exited(self) -> asyncio.Task[int]:
        """Completes with the exit code when the process ends."""
        assert self._exited is not None, f"{self.name} was never spawned"
        return self._exited

    async def start(self, ready_timeout_s: float = READY_TIMEOUT_S) -> ReadyLine:
        """Spawn the process and wait for its READY line.

        Raises:
            ChildFailedError: it exited first, or printed nothing in ``ready_timeout_s``
                (the process is left running; the caller stops it with everything else).
        """
        assert self._proc is None, f"{self.name} already started"
        log_file, self._log_offset = await asyncio.to_thread(self._open_log)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.program,
                self.role,
                *self.args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log_file,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                preexec_fn=die_with_parent(self.own_process_group),
            )
        finally:
            log_file.close()
        log.info("started %s (pid %d): %s", self.name, self._proc.pid, " ".join([self.role, *self.args]))
        self._exited = asyncio.create_task(self._proc.wait(), name=f"{self.name}-exit")
        self.ready = await self._wait_ready(ready_timeout_s)
        self._drain = asyncio.create_task(self._drain_stdout(), name=f"{self.name}-stdout")
        return self.ready

    def _open_log(self) -> tuple[BinaryIO, int]:  # runs in a thread
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "ab")  # noqa: SIM115 -- the child's stdout, closed when it ends
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log_file.write(f"==== {stamp} minipulsar standalone starts {self.name} ====\n".encode())
        log_file.flush()
        return log_file, log_file.tell()

    async def _wait_ready(self, timeout_s: float) -> ReadyLine:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                raw = await asyncio.wait_for(self._proc.stdout.readline(), remaining)
            except TimeoutError:
                break
            if not raw:  # stdout closed: the process is exiting
                code = await self.exited
                raise ChildFailedError(
                    f"{self.name} ended ({describe_exit(code)}) before it was ready\n{await self.log_tail()}"
                )
            ready = ReadyLine.parse(raw.decode(errors="replace"))
            if ready is not None and ready.role == self.role:
                return ready
            log.debug("%s stdout: %s", self.name, raw.decode(errors="replace").rstrip())
        raise ChildFailedError(f"{self.name} was not ready within {timeout_s:g}s\n{await self.log_tail()}")

    async def _drain_stdout(self) -> None:
        # Servers print nothing after READY, but an unread pipe that fills up would block one.
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            log.info("%s stdout: %s", self.name, line.decode(errors="replace").rstrip())

    async def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL; returns the exit code (None: never ran)."""
        if self._proc is None:
            return None
        if self._proc.returncode is None:
            self._signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), timeout_s)
            except TimeoutError:
                log.warning("%s did not stop within %gs; killing it", self.name, timeout_s)
                self._signal(signal.SIGKILL)
        code = await self.exited
        if self._drain is not None:
            await self._drain
        return code

    def kill(self) -> None:
        """SIGKILL now, without waiting (the second Ctrl-C)."""
        if self._proc is not None and self._proc.returncode is None:
            self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        try:
            self._proc.send_signal(sig)
        except ProcessLookupError:  # exited between the check and the signal
            pass

    async def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines this run wrote to the child's log, ready to quote."""
        text = await asyncio.to_thread(self._read_log)
        tail = text.splitlines()[-lines:]
        if not tail:
            return f"({self.log_path} is empty)"
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(tail)

    def _read_log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc.strerror})"


class Supervisor:
    """Children in start order. Stops them in reverse, children of one role together."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.stopping = False

    async def start(self, child: Child, ready_timeout_s: float = READY_TIMEOUT_S) -> ReadyLine:
        self.children.append(child)  # before spawning, so a failed or cancelled start is stopped too
        return await child.start(ready_timeout_s)

    async def first_exit(self) -> Child:
        """The first child to exit (the launcher treats that as a failure unless it is stopping)."""
        running = {c.exited: c for c in self.children if c.pid is not None}
        done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        return running[next(iter(done))]

    async def stop_all(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop every child, last started first; True when each exited with code 0."""
        self.stopping = True
        clean = True
        for group in _reverse_role_groups(self.children):
            running = [c for c in group if c.pid is not None and c.returncode is None]
            codes = await asyncio.gather(*(c.stop(timeout_s) for c in group))
            clean = clean and all(code in (0, None) for code in codes)
            for child in running:  # the others ended earlier and were reported then
                if child.returncode == 0:
                    log.info("%s stopped", child.name)
                else:
                    log.warning("%s ended: %s\n%s", child.name, describe_exit(child.returncode), await child.log_tail())
        return clean

    def kill_all(self) -> None:
        for child in self.children:
            child.kill()


def _reverse_role_groups(children: list[Child]) -> list[list[Child]]:
    """Reverse start order, consecutive children of one role grouped (bookies stop together)."""
    groups: list[list[Child]] = []
    for child in reversed(children):
        if groups and groups[-1][0].role == child.role:
            groups[-1].append(child)
        else:
            groups.append([child])
    return groups
