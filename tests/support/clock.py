"""A clock the test moves by hand (see :mod:`minipulsar.clock`)."""

from __future__ import annotations


class ManualClock:
    """Reads ``now_s`` (start: 100.0, so a zero difference is not confused with no reading);
    :meth:`advance` moves it forward only."""

    def __init__(self, now_s: float = 100.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a monotonic clock never goes backwards"
        self.now_s += seconds
