"""Running a bench as a user does, for the benches' smoke tests: ``python <args>`` in a
subprocess from the project root, bounded in time, its output captured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_bench(*args: str, timeout_s: float = 100) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` from the project root; the test fails unless it exits 0."""
    completed = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed


def bench_result(completed: subprocess.CompletedProcess[str], json_path: Path) -> dict[str, Any]:
    """The object a single-purpose bench wrote to ``--json``; its stdout must end with it."""
    result: dict[str, Any] = json.loads(json_path.read_text())
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == result, "stdout ends with the JSON line"
    return result
