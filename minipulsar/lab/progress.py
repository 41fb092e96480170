"""The progress line a lab run shows while it runs: scenario, variant, phase, time left.

On a terminal the line is rewritten in place; otherwise (a log, CI) each update is its own
line, at most one per ``min_interval_s`` per phase, so a log stays short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, min_interval_s: float = 10.0) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty()
        self._min_interval_s = min_interval_s
        self._last_line = ""
        self._last_at = 0.0
        self.scenario = ""

    def phase(self, text: str) -> None:
        """A new step (``baseline: starting 6 bookies``): always shown."""
        self._show(text, force=True)

    def tick(self, text: str, done_s: float, total_s: float) -> None:
        """The running step's advance (``baseline: workload``, 30 of 90 s)."""
        self._show(f"{text} {done_s:.0f}/{total_s:.0f} s", force=False)

    def _show(self, text: str, force: bool) -> None:
        line = f"[lab {self.scenario}] {text}" if self.scenario else f"[lab] {text}"
        now = time.monotonic()
        if self._tty:
            self._stream.write("\r\x1b[2K" + line)
        elif force or now - self._last_at >= self._min_interval_s:
            self._stream.write(line + "\n")
        else:
            return
        self._stream.flush()
        self._last_line, self._last_at = line, now

    def done(self, text: str) -> None:
        """The last line of a scenario (ends the in-place line on a terminal)."""
        self._show(text, force=True)
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()


class SilentProgress(Progress):
    """For tests and callers that want no output."""

    def _show(self, text: str, force: bool) -> None:
        pass
