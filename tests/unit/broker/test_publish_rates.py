"""Goal: rates are the counters' growth over the last sample interval, per object."""

from __future__ import annotations

from minipulsar.broker.topics.rates import RateTable


class Thing:
    pass


def test_rates_follow_the_last_interval_and_forget_objects_that_left() -> None:
    table, a, b = RateTable(), Thing(), Thing()
    table.begin()
    table.sample(a, "msgIn", 10, 2.0)
    table.sample(b, "msgIn", 4, 2.0)
    table.end()
    assert table.get(a, "msgIn") == 5.0 and table.get(b, "msgIn") == 2.0
    table.begin()
    table.sample(a, "msgIn", 10, 1.0)  # no growth
    table.end()
    assert table.get(a, "msgIn") == 0.0
    assert table.get(b, "msgIn") == 0.0, "b was not sampled: it is gone"
    assert table.get(a, "unknown") == 0.0
