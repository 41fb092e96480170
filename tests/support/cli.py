"""The ``minipulsar`` command line from tests: as a child process, or ``admin`` in this process.

- :func:`run_cli` runs ``python -m minipulsar ARGS`` with this interpreter, capturing its text
  output, and kills it after ``timeout_s``.
- :func:`run_admin` runs ``minipulsar admin ARGV`` in this process (no child: component tests
  may use it) and returns what it printed; it blocks, so async tests run it on a thread.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

CLI_TIMEOUT_S = 60.0


def run_cli(*args: str, timeout_s: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``minipulsar ARGS`` as a child process: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "minipulsar", *args], capture_output=True, text=True, timeout=timeout_s
    )


def run_admin(*argv: str) -> tuple[int, str, str]:
    """``minipulsar admin ARGV`` in this process: (exit code, stdout, stderr)."""
    from minipulsar.cli.main import build_parser

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        args = build_parser().parse_args(["admin", *argv])
        code: int = args.func(args)
    return code, out.getvalue(), err.getvalue()
