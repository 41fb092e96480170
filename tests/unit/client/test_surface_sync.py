"""The sync facade's machinery: calls run on the background loop and block the caller;
coroutine methods are awaited there, plain ones called there; stopping joins the thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

import minipulsar.sync
from minipulsar.sync import _Blocking, _LoopThread


class Target:
    def __init__(self) -> None:
        self.threads: list[str] = []

    async def work(self, value: int) -> int:
        self.threads.append(threading.current_thread().name)
        await asyncio.sleep(0)
        return value * 2

    def plain(self) -> asyncio.AbstractEventLoop:
        self.threads.append(threading.current_thread().name)
        return asyncio.get_running_loop()  # only works on the loop thread

    def returns_awaitable(self):
        return self.work(5)

    async def fails(self) -> None:
        raise KeyError("boom")

    label = "a value"


@pytest.fixture
def runner():
    runner = _LoopThread()
    yield runner
    runner.stop()


def test_coroutine_methods_block_until_done_on_the_loop_thread(runner: _LoopThread) -> None:
    target = Target()
    wrapped = _Blocking(target, runner)
    assert wrapped.work(21) == 42
    assert wrapped.plain() is runner.loop
    assert wrapped.returns_awaitable() == 10
    assert wrapped.label == "a value"
    assert set(target.threads) == {"minipulsar-sync-loop"}


def test_errors_come_back_to_the_caller(runner: _LoopThread) -> None:
    with pytest.raises(KeyError, match="boom"):
        _Blocking(Target(), runner).fails()


def test_a_blocking_call_from_the_loop_thread_is_refused_not_deadlocked(runner: _LoopThread) -> None:
    wrapped = _Blocking(Target(), runner)

    async def inside() -> None:
        wrapped.work(1)

    with pytest.raises(RuntimeError, match="deadlock"):
        runner.run(inside())


def test_stop_joins_the_loop_thread() -> None:
    runner = _LoopThread()
    assert runner.running
    runner.stop()
    assert not runner.running and runner.loop.is_closed()
    runner.stop()  # twice is fine


def test_the_sync_module_offers_the_clients_value_names() -> None:
    assert minipulsar.sync.MessageId is minipulsar.MessageId
    assert minipulsar.sync.ConsumerType.Shared is minipulsar.ConsumerType.Shared
    with pytest.raises(AttributeError):
        minipulsar.sync.NoSuchName  # noqa: B018


def test_a_client_that_cannot_be_created_leaves_no_thread_behind() -> None:
    before = threading.active_count()
    with pytest.raises(TypeError):
        minipulsar.sync.Client("pulsar://127.0.0.1:6650", no_such_option=1)
    assert threading.active_count() == before
