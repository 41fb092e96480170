"""``failure_of`` and ``outcome_of`` (minipulsar/supervision.py): the two boundaries that hand an
unexpected exception back instead of swallowing it.
``guarded_each``: many listeners at one boundary, each failure logged and the next one called."""

from __future__ import annotations

import logging

import pytest

from minipulsar.supervision import failure_of, guarded_each, outcome_of

log = logging.getLogger("tests.supervision")


def test_failure_of_logs_the_exception_with_its_traceback_and_returns_it(caplog: pytest.LogCaptureFixture) -> None:
    def broken(value: int) -> None:
        raise ValueError(f"a bug with {value}")

    error = failure_of(log, "the writer's round", broken, 7)
    assert isinstance(error, ValueError) and str(error) == "a bug with 7"
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.getMessage() == "the writer's round failed"
    assert record.exc_info is not None and record.exc_info[1] is error


def test_failure_of_returns_none_and_logs_nothing_when_the_call_returns(caplog: pytest.LogCaptureFixture) -> None:
    called: list[int] = []
    assert failure_of(log, "a round", called.append, 1) is None
    assert called == [1] and not caplog.records


def test_outcome_of_hands_back_the_result_or_the_exception_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert outcome_of(lambda: 42) == (42, None)
    error = RuntimeError("for the waiting caller")

    def broken() -> int:
        raise error

    assert outcome_of(broken) == (None, error)
    assert not caplog.records


def test_neither_catches_what_is_not_an_exception() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        failure_of(log, "a round", interrupted)
    with pytest.raises(KeyboardInterrupt):
        outcome_of(interrupted)


def test_guarded_each_calls_every_listener_and_logs_each_failure_once(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[tuple[str, int]] = []

    def listener(i: int):
        def call(first: str, second: int) -> None:
            calls.append((first, second))
            if i in (0, 2):
                raise ValueError(f"bug {i}")

        return call

    guarded_each(log, "a listener", [listener(i) for i in range(4)], "x", [10, 11, 12, 13])
    assert calls == [("x", 10), ("x", 11), ("x", 12), ("x", 13)]
    assert [r.getMessage() for r in caplog.records] == ["a listener failed"] * 2
    assert all(r.levelno == logging.ERROR and r.exc_info is not None for r in caplog.records)
