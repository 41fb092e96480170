"""The read thread pool: ordered per ledger, bounded per thread, results handed back on the loop."""

from __future__ import annotations

import asyncio
import threading

import pytest
from prometheus_client import REGISTRY

from minipulsar.bookie.read_pool import ReadThreadPool
from minipulsar.errors import ServiceNotReadyError, TooManyRequestsError

GATE_TIMEOUT_S = 10.0


@pytest.fixture
def pool():
    pool = ReadThreadPool(threads=2, pending_per_thread_max=3)
    yield pool
    pool.close()


def blocked_on(gate: threading.Event):
    return lambda: gate.wait(GATE_TIMEOUT_S)


async def test_a_task_runs_off_the_loop_and_its_result_comes_back(pool: ReadThreadPool) -> None:
    loop_thread = threading.current_thread()
    assert await pool.submit(7, threading.current_thread) is not loop_thread
    assert await pool.submit(7, lambda: 42) == 42


async def test_an_exception_in_a_task_fails_only_its_future(pool: ReadThreadPool) -> None:
    def fail() -> None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await pool.submit(1, fail)
    assert await pool.submit(1, lambda: "still serving") == "still serving"
    assert pool.pending == [0, 0]


async def test_tasks_of_one_ledger_run_on_one_thread_in_submit_order() -> None:
    pool = ReadThreadPool(threads=3, pending_per_thread_max=100)
    try:
        ran: list[tuple[int, int, str]] = []
        futures = [
            pool.submit(ledger, lambda ledger=ledger, i=i: ran.append((ledger, i, threading.current_thread().name)))
            for i in range(30)
            for ledger in (4, 5, 7)
        ]
        await asyncio.gather(*futures)
        for ledger in (4, 5, 7):
            mine = [(i, name) for ran_ledger, i, name in ran if ran_ledger == ledger]
            assert [i for i, _ in mine] == list(range(30))
            assert {name for _, name in mine} == {f"BookieReadThreadPool-{ledger % 3}"}
    finally:
        pool.close()


async def test_a_full_thread_queue_rejects_at_submit_and_other_threads_still_accept(pool: ReadThreadPool) -> None:
    """Goal: the bound is per thread and checked at submit (TooManyRequests), counted in
    READ_ENTRY_REJECTED; it frees up as tasks finish.
    Method: block thread 0 on a gate, fill its 3 slots, submit a 4th."""
    gate = threading.Event()
    rejected_before = REGISTRY.get_sample_value("bookkeeper_server_READ_ENTRY_REJECTED")
    held = [pool.submit(0, blocked_on(gate)), pool.submit(2, lambda: 2), pool.submit(4, lambda: 4)]
    assert pool.pending == [3, 0]
    with pytest.raises(TooManyRequestsError, match="maxPendingReadRequestsPerThread=3"):
        pool.submit(6, lambda: 6)
    assert REGISTRY.get_sample_value("bookkeeper_server_READ_ENTRY_REJECTED") == rejected_before + 1
    assert await pool.submit(1, lambda: "thread 1 is free") == "thread 1 is free"
    gate.set()
    assert await asyncio.gather(*held) == [True, 2, 4]
    assert await pool.submit(6, lambda: 6) == 6


async def test_queue_sizes_and_wait_times_are_on_metrics(pool: ReadThreadPool) -> None:
    gate = threading.Event()
    queued_before = REGISTRY.get_sample_value("bookkeeper_server_BookieReadThreadPool_task_queued_count")
    held = [pool.submit(1, blocked_on(gate)), pool.submit(3, lambda: None)]
    assert REGISTRY.get_sample_value("bookkeeper_server_BookieReadThreadPool_queue_1") >= 2
    assert REGISTRY.get_sample_value("bookkeeper_server_BookieReadThreadPool_max_queue_size") >= 3
    gate.set()
    await asyncio.gather(*held)
    assert REGISTRY.get_sample_value("bookkeeper_server_BookieReadThreadPool_task_queued_count") == queued_before + 2


async def test_close_runs_the_queued_tasks_then_refuses_new_ones() -> None:
    pool = ReadThreadPool(threads=1, pending_per_thread_max=10)
    gate = threading.Event()
    futures = [pool.submit(0, blocked_on(gate)), pool.submit(0, lambda: "queued behind")]
    closing = asyncio.create_task(asyncio.to_thread(pool.close))
    await asyncio.sleep(0)
    gate.set()
    await closing
    assert await asyncio.gather(*futures) == [True, "queued behind"]
    with pytest.raises(ServiceNotReadyError):
        pool.submit(0, lambda: None)
    pool.close()  # idempotent


async def test_a_task_waiting_for_its_turn_holds_its_place_and_runs_once_ready(pool: ReadThreadPool) -> None:
    """Goal: a task submitted with ``ready`` counts against its thread's bound at once (as a
    BookKeeper read thread blocked on a busy channel holds its queue) but runs only once
    ``ready`` is done; given up (cancelled), it never runs and gives its place back."""
    loop = asyncio.get_running_loop()
    ran: list[str] = []
    first, second = loop.create_future(), loop.create_future()
    waiting = pool.submit(0, lambda: ran.append("first") or "first", first)
    given_up = pool.submit(0, lambda: ran.append("second") or "second", second)
    assert pool.pending[0] == 2 and ran == []
    third = pool.submit(0, lambda: "third")
    with pytest.raises(TooManyRequestsError):
        pool.submit(0, lambda: "refused")
    first.set_result(None)
    assert await waiting == "first" and ran == ["first"]
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await given_up
    assert "second" not in ran
    assert await third == "third"
    assert pool.pending[0] == 0
    assert await pool.submit(0, lambda: "room again") == "room again"


async def test_the_plain_executor_answers_a_read_whose_turn_comes_after_it_closed() -> None:
    """A read waiting for its connection's turn when the executor closes is answered
    ServiceNotReady, not left pending (run_in_executor raised inside the callback)."""
    from minipulsar.bookie.storage.read_executor import ThreadPoolReadExecutor

    executor = ThreadPoolReadExecutor(1)
    turn = asyncio.get_running_loop().create_future()
    waiting = executor.submit(0, lambda: "never", turn)
    executor.close()
    turn.set_result(None)
    with pytest.raises(ServiceNotReadyError):
        await asyncio.wait_for(waiting, 5)


class Dropped(Exception):
    pass


@pytest.mark.parametrize("executor_kind", ["read pool", "plain executor"])
async def test_a_task_whose_turn_fails_never_runs_and_fails_with_that_error(executor_kind: str) -> None:
    """A turn given up with an error (a read dropped because its peer does not take its
    responses) fails the task with that error, never runs it, and gives its place back —
    whether the turn failed before or after the task was submitted."""
    from minipulsar.bookie.storage.read_executor import ThreadPoolReadExecutor

    executor = (
        ReadThreadPool(threads=1, pending_per_thread_max=3)
        if executor_kind == "read pool"
        else ThreadPoolReadExecutor(1)
    )
    try:
        loop = asyncio.get_running_loop()
        ran: list[str] = []
        later = loop.create_future()
        failed_later = executor.submit(0, lambda: ran.append("later"), later)
        already = loop.create_future()
        already.set_exception(Dropped("not taken"))
        failed_already = executor.submit(0, lambda: ran.append("already"), already)
        later.set_exception(Dropped("not taken"))
        for future in (failed_later, failed_already):
            with pytest.raises(Dropped):
                await asyncio.wait_for(future, 5)
        assert ran == []
        if isinstance(executor, ReadThreadPool):
            assert executor.pending[0] == 0
    finally:
        executor.close()
