"""``minipulsar.sync``: the blocking client for scripts, shaped like the official ``pulsar`` module.

A thin facade, not a second client: ``Client`` starts one event loop on a daemon thread and
runs the asyncio :class:`minipulsar.Client` there; every call is submitted to that loop and
waited for (``run_coroutine_threadsafe(...).result()``). Producers, consumers and readers are
wrapped the same way: an ``async`` method of the wrapped object becomes a blocking call, a plain
method is called on the loop thread, other attributes pass through. So the sync API has the
same calls, arguments and errors as the asyncio one, e.g.::

    client = minipulsar.sync.Client("pulsar://localhost:6650")
    producer = client.create_producer("my-topic")
    producer.send(b"hello")
    consumer = client.subscribe("my-topic", "sub")
    msg = consumer.receive(timeout_millis=5000)
    consumer.acknowledge(msg)
    client.close()

``send_async(content, callback)`` callbacks run on the client's loop thread (as the official
client runs them on its I/O thread): keep them short and do not call blocking methods from
them. ``close()`` closes everything the client created, then stops the loop and joins its
thread; a client left open is closed at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import inspect
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import minipulsar
from minipulsar.supervision import guarded

log = logging.getLogger(__name__)

T = TypeVar("T")

_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


class _LoopThread:
    """An event loop running forever on a daemon thread, until :meth:`stop`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="minipulsar-sync-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(
                "a blocking minipulsar.sync call from the client's own loop thread "
                "(e.g. inside a send_async callback) would deadlock"
            )
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise
        except KeyboardInterrupt:
            future.cancel()
            raise

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a plain (non-async) function on the loop thread and return its result."""

        async def call() -> T:
            return function(*args, **kwargs)

        return self.run(call())

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class _Blocking:
    """Wraps an object living on the loop: its coroutine methods become blocking calls, its
    other methods run on the loop thread; results that are client objects are wrapped too."""

    __slots__ = ("_runner", "_target")

    def __init__(self, target: Any, runner: _LoopThread) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_runner", runner)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute
        runner = self._runner

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            if inspect.iscoroutinefunction(attribute):
                result = runner.run(attribute(*args, **kwargs))
            else:
                result = runner.call(attribute, *args, **kwargs)
                if inspect.isawaitable(result):
                    result = runner.run(_await(result))
            return _wrap(result, runner)

        return call

    def __repr__(self) -> str:
        return f"<sync {self._target!r}>"

    def __enter__(self) -> _Blocking:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


_WRAPPED_TYPES: tuple[type, ...] = ()


def _wrap(result: Any, runner: _LoopThread) -> Any:
    """Producers, consumers and readers come back as blocking wrappers; values as they are."""
    global _WRAPPED_TYPES  # noqa: PLW0603 -- filled on first use: importing the client is slow
    if not _WRAPPED_TYPES:
        _WRAPPED_TYPES = tuple(
            getattr(minipulsar, name)
            for name in ("Producer", "Consumer", "Reader", "PartitionedProducer", "MultiTopicsConsumer")
        )
    return _Blocking(result, runner) if isinstance(result, _WRAPPED_TYPES) else result


class Client(_Blocking):
    """The blocking client: ``minipulsar.sync.Client(service_url, **same kwargs as minipulsar.Client)``."""

    __slots__ = ("__weakref__",)

    def __init__(self, service_url: str, **kwargs: Any) -> None:
        runner = _LoopThread()

        async def create() -> Any:
            return minipulsar.Client(service_url, **kwargs)

        try:
            target = runner.run(create())
        except BaseException:
            runner.stop()
            raise
        super().__init__(target, runner)
        _live_clients.add(self)

    def close(self) -> None:
        """Close the client and everything it created; then stop its loop thread."""
        runner = self._runner
        if not runner.running:
            return
        try:
            runner.run(self._target.close())
        finally:
            runner.stop()

    def shutdown(self) -> None:
        self.close()


@atexit.register
def _close_live_clients() -> None:
    for client in list(_live_clients):
        guarded(log, "closing a client at exit", client.close)


def __getattr__(name: str) -> Any:
    """The asyncio client's values (MessageId, ConsumerType, Timeout …) under the same names, so
    that ``import minipulsar.sync as pulsar`` reads like the official module."""
    if name != "Client" and name in minipulsar.__all__:
        return getattr(minipulsar, name)
    raise AttributeError(f"module 'minipulsar.sync' has no attribute {name!r}")


__all__ = ["Client"]
