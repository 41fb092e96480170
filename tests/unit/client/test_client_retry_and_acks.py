"""Goal: retrying until a deadline (retriable errors retried with backoff, others at once, and
the final error names the root cause with its class), and the acknowledgement grouping
(adaptive groups with receipts, timed groups without, nothing lost while disconnected)."""

from __future__ import annotations

import asyncio
import time

import pytest

from minipulsar.client.ack_grouping import AckGroupingTracker
from minipulsar.client.backoff import Backoff
from minipulsar.client.exceptions import Timeout
from minipulsar.client.retry import LAST_ATTEMPT_S_MIN, gave_up_error, retry_until
from minipulsar.errors import ConnectionClosedError, ServiceNotReadyError, TopicNotFoundError
from tests.support.process import wait_for


async def test_retriable_errors_are_retried_until_an_attempt_succeeds() -> None:
    failures = [ConnectionClosedError("refused"), ServiceNotReadyError("loading")]

    async def attempt(remaining_s: float) -> str:
        if failures:
            raise failures.pop(0)
        return "done"

    assert await retry_until(time.monotonic() + 5, attempt, Backoff(0.001, 0.01), "op") == "done"


async def test_a_non_retriable_error_is_raised_at_once() -> None:
    calls = []

    async def attempt(remaining_s: float) -> None:
        calls.append(remaining_s)
        raise TopicNotFoundError("no such topic")

    with pytest.raises(TopicNotFoundError, match="no such topic"):
        await retry_until(time.monotonic() + 5, attempt, Backoff(0.001, 0.01), "op")
    assert len(calls) == 1


async def test_the_deadline_error_has_the_last_errors_class_and_names_it() -> None:
    async def attempt(remaining_s: float) -> None:
        raise ServiceNotReadyError("a new ensemble needs 1 bookies, 0 available")

    started = time.monotonic()
    with pytest.raises(ServiceNotReadyError) as raised:
        await retry_until(started + 0.4, attempt, Backoff(0.01, 0.05), "create producer on t")
    assert 0.3 <= time.monotonic() - started < 1.0
    assert str(raised.value).startswith("create producer on t: a new ensemble needs 1 bookies")
    assert "gave up after" in str(raised.value)


async def test_an_attempt_that_times_out_becomes_a_timeout_naming_the_operation() -> None:
    async def attempt(remaining_s: float) -> None:
        raise TimeoutError()

    with pytest.raises(Timeout, match="lookup of t: no answer"):
        await retry_until(time.monotonic() + 0.3, attempt, Backoff(0.01, 0.05), "lookup of t")
    assert isinstance(gave_up_error("op", None, 1.0), Timeout)


async def test_a_timeout_after_a_refusal_still_names_the_refusal() -> None:
    """A last attempt that times out must not hide why the earlier ones failed (the CLI's
    one-line error for an unreachable broker names its address)."""
    calls = []

    async def attempt(remaining_s: float) -> None:
        calls.append(remaining_s)
        if len(calls) == 1:
            raise ConnectionClosedError("connection refused by 127.0.0.1:6650")
        raise TimeoutError()

    with pytest.raises(Timeout) as raised:
        await retry_until(time.monotonic() + 0.5, attempt, Backoff(0.01, 0.05), "partition metadata of t")
    assert len(calls) >= 2
    assert "no answer within" in str(raised.value)
    assert "the attempt before failed: connection refused by 127.0.0.1:6650" in str(raised.value)


async def test_no_attempt_starts_after_a_backoff_with_less_than_the_last_attempt_minimum() -> None:
    """A backoff longer than the time left sleeps only until LAST_ATTEMPT_S_MIN is left, so the
    attempt after it has time to get an answer."""
    calls = []

    async def attempt(remaining_s: float) -> None:
        calls.append(remaining_s)
        raise ConnectionClosedError("connection refused by 127.0.0.1:6650")

    with pytest.raises(ConnectionClosedError, match=r"127\.0\.0\.1:6650"):
        await retry_until(time.monotonic() + 0.4, attempt, Backoff(5.0, 5.0), "lookup of t")
    assert len(calls) == 2, calls
    assert calls[1] >= LAST_ATTEMPT_S_MIN / 2, calls  # what is left after the sleep, less its overshoot


class Wire:
    """What a consumer would put on the wire: (ids, type, receipt) per ACK; answers on demand."""

    def __init__(self) -> None:
        self.connected = True
        self.sent: list[tuple[list, str, bool]] = []
        self.answers: list[asyncio.Future] = []

    def __call__(self, message_ids, ack_type, receipt):
        if not self.connected:
            return False
        self.sent.append((message_ids, ack_type, receipt))
        if not receipt:
            return True
        answer = asyncio.get_running_loop().create_future()
        self.answers.append(answer)
        return answer


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_with_receipts_acks_of_one_iteration_share_an_ack_and_later_ones_wait_for_its_answer() -> None:
    wire = Wire()
    tracker = AckGroupingTracker(wire, 100, receipts=True)
    first = [tracker.add_individual((1, i)) for i in range(3)]
    await settle()
    assert wire.sent == [([[1, 0], [1, 1], [1, 2]], "individual", True)]
    later = tracker.add_individual((1, 3))
    await settle()
    assert len(wire.sent) == 1, "waits for the answer in flight"
    wire.answers[0].set_result(None)
    await settle()
    assert all(f.done() for f in first) and not later.done()
    assert wire.sent[1] == ([[1, 3]], "individual", True)
    wire.answers[1].set_result(None)
    await settle()
    assert later.done()


async def test_without_receipts_acks_go_after_the_group_time_or_at_the_group_size() -> None:
    wire = Wire()
    tracker = AckGroupingTracker(wire, 50, receipts=False, max_group_size=5)
    assert tracker.add_individual((1, 0)) is None
    tracker.add_cumulative((0, 9))
    await settle()
    assert wire.sent == []
    await wait_for(lambda: wire.sent, timeout_s=1, interval_s=0.005)
    assert wire.sent == [([[1, 0]], "individual", False), ([[0, 9]], "cumulative", False)]
    for i in range(5):
        tracker.add_individual((2, i))
    assert len(wire.sent) == 3, "a full group goes at once"


async def test_acks_wait_while_disconnected_and_an_ack_lost_with_its_connection_is_sent_again() -> None:
    wire = Wire()
    tracker = AckGroupingTracker(wire, 100, receipts=True)
    wire.connected = False
    receipt = tracker.add_individual((1, 0))
    await settle()
    assert wire.sent == [] and len(tracker) == 1
    wire.connected = True
    tracker.flush()  # what a re-subscription does
    wire.connected = False
    wire.answers[0].set_exception(ConnectionClosedError("dropped before the answer"))
    await settle()
    assert not receipt.done() and len(tracker) == 1, "kept for the next connection"
    wire.connected = True
    tracker.flush()
    assert wire.sent[-1] == ([[1, 0]], "individual", True)
    wire.answers[1].set_result(None)
    await settle()
    assert receipt.done() and receipt.exception() is None
