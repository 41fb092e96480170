"""The add-rate lab fault's token bucket (bookie/add_fault.py), on a fake clock."""

from __future__ import annotations

import pytest

from minipulsar.bookie.add_fault import AddRateFault, from_setting


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_a_burst_gets_one_seconds_worth_and_the_rest_is_refused() -> None:
    fault = AddRateFault(10, clock=FakeClock())
    assert fault.admit(25) == 10
    assert fault.admit(1) == 0
    assert fault.refused == 16


def test_tokens_refill_at_the_rate_and_cap_at_one_second() -> None:
    clock = FakeClock()
    fault = AddRateFault(10, clock=clock)
    fault.admit(10)
    clock.now_s = 0.5
    assert fault.admit(100) == 5
    clock.now_s = 60.0
    assert fault.admit(100) == 10


def test_refused_adds_take_no_token() -> None:
    clock = FakeClock()
    fault = AddRateFault(10, clock=clock)
    fault.admit(10)
    for _ in range(50):
        assert fault.admit(3) == 0
    clock.now_s = 1.0
    assert fault.admit(10) == 10


def test_zero_means_no_fault() -> None:
    assert from_setting(0) is None
    with pytest.raises(ValueError):
        AddRateFault(0)
