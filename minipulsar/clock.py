"""Clocks: where code decides by elapsed time, it reads a :data:`Clock` passed in.

A clock is a function returning seconds on a monotonic scale (``time.monotonic`` in
production, the default everywhere one is taken). Tests pass a manual clock
(``tests.support.clock.ManualClock``) and move it by hand, so a decision that waits minutes
in production is checked in microseconds, and repeatably.

Invariant: a clock never goes backwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

Clock: TypeAlias = Callable[[], float]
"""Seconds, monotonic; only differences between two readings mean anything."""

MONOTONIC: Clock = time.monotonic
