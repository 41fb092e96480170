"""The flush pacer: a big flush spread over a fraction of its half's fill time, small or
unpaced flushes at full speed, and no more waiting once the active half fills up."""

from __future__ import annotations

import pytest

from minipulsar.bookie.storage.single_directory import PACE_MAX_S, PACE_MIN_BYTES, FlushPacer

MIB = 1 << 20


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def pacer(size: int, fill_s: float | None, time: FakeTime, hurry: bool = False) -> FlushPacer:
    return FlushPacer(size, fill_s, lambda: hurry, clock=time.clock, sleep=time.sleep)


def test_a_big_flush_follows_a_quarter_of_its_fill_time() -> None:
    time = FakeTime()
    paced = pacer(32 * MIB, 2.0, time)
    for _ in range(32):
        paced.wrote(MIB)
    assert time.now - 100.0 == pytest.approx(0.5)  # 2.0 s × 0.25, a step at a time
    assert len(time.slept) == 32 and paced.waited_s == pytest.approx(0.5)


def test_a_slowly_filled_half_is_flushed_within_the_cap() -> None:
    time = FakeTime()
    paced = pacer(32 * MIB, 60.0, time)
    for _ in range(32):
        paced.wrote(MIB)
    assert time.now - 100.0 == pytest.approx(PACE_MAX_S)


def test_writes_behind_schedule_do_not_wait() -> None:
    time = FakeTime()
    paced = pacer(8 * MIB, 1.0, time)  # 0.25 s for 8 MiB
    time.now += 0.2  # the first 4 MiB took longer than their schedule
    paced.wrote(4 * MIB)
    assert time.slept == []
    paced.wrote(4 * MIB)
    assert time.slept == [pytest.approx(0.05)]


@pytest.mark.parametrize(("size", "fill_s"), [(PACE_MIN_BYTES - 1, 1.0), (32 * MIB, None)])
def test_small_or_unmeasured_flushes_are_not_paced(size: int, fill_s: float | None) -> None:
    time = FakeTime()
    paced = pacer(size, fill_s, time)
    paced.wrote(size)
    assert not paced.pacing and time.slept == []


def test_pacing_ends_when_the_active_half_fills_up() -> None:
    time = FakeTime()
    paced = pacer(32 * MIB, 2.0, time, hurry=True)
    paced.wrote(MIB)
    paced.wrote(MIB)
    assert time.slept == [] and not paced.pacing
