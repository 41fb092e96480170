"""Requests in flight: request id → future (or callback), with deadlines checked by one timer
per connection.

A request waits either on a future (:meth:`RequestTable.register`) or on a callback
(:meth:`RequestTable.register_callback`): ``callback(response, None)`` or ``callback(None,
error)``, called synchronously where the answer, the deadline or the connection loss is seen.
The callback form is for hot paths (a ledger's adds): no future, no ``call_soon`` hop per answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from minipulsar.errors import MiniPulsarError, RequestTimeoutError, error_for_code
from minipulsar.protocol.commands import Error
from minipulsar.protocol.schema import Command

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Command | None, MiniPulsarError | None], None]
"""Called once with the response, or with the error that ended the request."""

TIMER_INTERVAL_S = 0.1
"""Deadline resolution: a request times out within this much of its timeout."""


class RequestTable:
    """Correlates responses to requests by id.

    Invariant: every registered future is completed exactly once — by its response, by its
    deadline (:class:`RequestTimeoutError`) or by :meth:`fail_all` when the connection drops.
    """

    __slots__ = ("_loop", "_next_id", "_pending", "_timer", "name")

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str = "") -> None:
        self._loop = loop
        self._pending: dict[int, tuple[asyncio.Future[Command] | ResponseCallback, float, str]] = {}
        self._next_id = 0
        self._timer: asyncio.TimerHandle | None = None
        self.name = name

    def __len__(self) -> int:
        return len(self._pending)

    def new_id(self) -> int:
        """A request id no other request of this table has had (an id never registered is
        simply skipped)."""
        self._next_id += 1
        return self._next_id

    def register(self, request_id: int, description: str, timeout_s: float) -> asyncio.Future[Command]:
        """The future the response to ``request_id`` (from :meth:`new_id`) will complete."""
        future: asyncio.Future[Command] = self._loop.create_future()
        self._pending[request_id] = (future, time.monotonic() + timeout_s, description)
        if self._timer is None:
            self._timer = self._loop.call_later(TIMER_INTERVAL_S, self._expire)
        return future

    def register_callback(
        self, request_id: int, description: str, timeout_s: float, callback: ResponseCallback
    ) -> None:
        """Like :meth:`register`, answered by calling ``callback`` instead of through a future."""
        self._pending[request_id] = (callback, time.monotonic() + timeout_s, description)
        if self._timer is None:
            self._timer = self._loop.call_later(TIMER_INTERVAL_S, self._expire)

    def complete(self, request_id: int, response: Command) -> bool:
        """Resolve request ``request_id`` with ``response``; False when no request has that id.

        An id we no longer know is usually a response that arrived after its timeout.
        """
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return False
        waiter = entry[0]
        if isinstance(response, Error):
            _fail(waiter, error_for_code(response.code, response.message))
        elif isinstance(waiter, asyncio.Future):
            if not waiter.done():
                waiter.set_result(response)
        else:
            waiter(response, None)
        return True

    def fail_all(self, error: MiniPulsarError) -> None:
        pending, self._pending = self._pending, {}
        self._cancel_timer()
        for waiter, _, description in pending.values():
            _fail(waiter, type(error)(f"{error} (request: {description})"))

    def _expire(self) -> None:
        self._timer = None
        now = time.monotonic()
        expired = [rid for rid, (_, deadline, _) in self._pending.items() if deadline <= now]
        for rid in expired:
            waiter, _, description = self._pending.pop(rid)
            _fail(waiter, RequestTimeoutError(f"{self.name}: no answer to {description}"))
        if self._pending:
            self._timer = self._loop.call_later(TIMER_INTERVAL_S, self._expire)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _fail(waiter: asyncio.Future[Command] | ResponseCallback, error: MiniPulsarError) -> None:
    if isinstance(waiter, asyncio.Future):
        if not waiter.done():
            waiter.set_exception(error)
    else:
        waiter(None, error)
