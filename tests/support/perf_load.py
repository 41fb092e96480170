"""Steady traffic on a cluster from child processes: ``minipulsar perf produce`` and ``perf consume``.

:func:`perf_load` starts one consumer process and one producer process on ``topics`` topics
(``TOPIC-0`` …) and stops both (TERM, then KILL) when the context exits. Their output goes to
files under ``log_dir``. The traffic runs outside the caller's process, so a caller that blocks
(a browser driven synchronously) does not stall it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

STOP_TIMEOUT_S = 10.0


@contextlib.contextmanager
def perf_load(
    service_url: str, topic: str, log_dir: Path, *, topics: int = 4, rate: float = 500.0, size: int = 1024
) -> Iterator[None]:
    """``rate`` messages/s of ``size`` bytes over ``topics`` topics, consumed by one Shared subscription."""
    log_dir.mkdir(parents=True, exist_ok=True)
    perf = [sys.executable, "-m", "minipulsar", "perf"]
    common = ["-u", service_url, "-t", str(topics), "-i", "5"]
    commands = {
        "perf-consume": [*perf, "consume", *common, "-ss", "console", "-st", "Shared", topic],
        "perf-produce": [*perf, "produce", *common, "-r", str(rate), "-s", str(size), topic],
    }
    processes: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as stack:
        try:
            for name, command in commands.items():
                log = stack.enter_context((log_dir / f"{name}.log").open("wb"))
                processes.append(
                    subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                )
            yield
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
