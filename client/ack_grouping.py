"""Grouped acknowledgements (Pulsar's ``PersistentAcknowledgmentsGroupingTracker``).

Acknowledgements are not sent one by one: they are collected and sent together, one ACK for
the individual ones and one for the highest cumulative one. Two modes:

- **with receipts** (``ack_receipt_enabled=True``, minipulsar's default): ``acknowledge``
  returns once the broker made the acknowledgement durable (its SUCCESS comes after the
  cursor's new position is stored), so an acknowledged message is never delivered again, even
  after a broker crash. Grouping is adaptive, like a journal's group commit: an
  acknowledgement goes out at the end of the loop iteration it was made in, unless an ACK of
  this consumer is still waiting for its receipt — then it joins the next group, sent when
  that receipt comes, after at most ``acknowledgment_group_time_ms``, or at once when
  ``max_acknowledgment_group_size`` (1000) are waiting. A consumer that acknowledges
  one message at a time pays one round trip per message; many concurrent acknowledgements
  share one.
- **fire-and-forget** (``ack_receipt_enabled=False``, Pulsar's default): ``acknowledge``
  returns at once; the group goes out ``acknowledgment_group_time_ms`` (Pulsar: 100 ms) after
  its first acknowledgement, or when 1000 are waiting, as an ACK without a request id that the
  broker does not answer. ``flush(receipt=True)`` (what ``close`` does) still waits for the
  broker. ``acknowledgment_group_time_ms=0`` sends within the loop iteration.

While the consumer is not connected nothing is sent: acknowledgements stay here and go out
after it re-subscribed (the broker would otherwise redeliver what the application processed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from minipulsar.errors import MiniPulsarError
from minipulsar.protocol import AckType, Command

DEFAULT_GROUP_TIME_MS = 100  # Pulsar: acknowledgementsGroupTimeMicros = 100 ms
MAX_GROUP_SIZE = 1000  # Pulsar: maxAcknowledgmentGroupSize

EntryKey = tuple[int, int]
SendAck = Callable[[list[list[int]], AckType, bool], "asyncio.Future[Command] | bool"]
"""``send(message_ids, ack_type, receipt)``: put one ACK on the wire and return True, or with
``receipt`` the future of the broker's answer; False when the consumer is not connected
(nothing was sent)."""


class AckGroupingTracker:
    """Invariant: an acknowledgement is either pending here or was handed to ``send`` once;
    every receipt waiter is resolved by the answer to the ACK that carried its acknowledgement
    (or failed when the consumer closes)."""

    def __init__(
        self,
        send: SendAck,
        group_time_ms: float = DEFAULT_GROUP_TIME_MS,
        *,
        receipts: bool = True,
        max_group_size: int = MAX_GROUP_SIZE,
    ) -> None:
        if group_time_ms < 0 or max_group_size < 1:
            raise ValueError("acknowledgment_group_time_ms must be >= 0 and the group size >= 1")
        self._send = send
        self._group_time_s = group_time_ms / 1000
        self._receipts = receipts
        self._max_group_size = max_group_size
        self._loop = asyncio.get_running_loop()
        self._individual: dict[EntryKey, None] = {}
        self._cumulative: EntryKey | None = None
        self._waiters: list[asyncio.Future[None]] = []
        """Waiting for the receipt of the pending group."""
        self._in_flight = 0
        """ACK requests sent and not answered yet (receipt mode)."""
        self._retry_lost = True
        """Re-queue the acknowledgements of an ACK whose connection dropped (off once closing)."""
        self._soon: asyncio.Handle | None = None
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._individual) + (self._cumulative is not None)

    def add_individual(self, key: EntryKey) -> asyncio.Future[None] | None:
        """Queue an acknowledgement; in receipt mode, the future of its receipt."""
        self._individual[key] = None
        return self._added()

    def add_cumulative(self, key: EntryKey) -> asyncio.Future[None] | None:
        if self._cumulative is None or key > self._cumulative:
            self._cumulative = key
        for done in [k for k in self._individual if k <= key]:  # covered by the cumulative one
            del self._individual[done]
        return self._added()

    def flush(self, receipt: bool = False) -> asyncio.Future | None:
        """Send what is pending now. With ``receipt`` (always in receipt mode) the ACKs are
        requests and the future of their answers is returned; None when nothing could be sent
        (not connected: the acknowledgements stay) or no receipt was asked for."""
        self._cancel_timers()
        receipt = receipt or self._receipts
        if not self._individual and self._cumulative is None:
            return _resolved(self._loop) if receipt else None
        waiters, self._waiters = self._waiters, []
        groups = self._groups()
        answers = []
        for message_ids, ack_type in groups:
            answer = self._send(message_ids, ack_type, receipt)
            if answer is False:  # not connected: keep everything for after the reconnection
                self._waiters = waiters + self._waiters
                return None
            if ack_type == "individual":
                self._individual.clear()
            else:
                self._cumulative = None
            answers.append(answer)
        if not receipt:
            return None
        combined = asyncio.gather(*(a for a in answers if isinstance(a, asyncio.Future)))
        self._in_flight += 1
        combined.add_done_callback(lambda done: self._answered(waiters, groups, done))
        return combined

    def clear(self) -> None:
        self._individual.clear()
        self._cumulative = None
        self._cancel_timers()

    def fail_waiters(self, error: BaseException) -> None:
        self._retry_lost = False
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)

    # -- scheduling -----------------------------------------------------------------------------

    def _added(self) -> asyncio.Future[None] | None:
        waiter = None
        if self._receipts:
            waiter = self._loop.create_future()
            self._waiters.append(waiter)
        if len(self._individual) >= self._max_group_size:
            self.flush()
        elif self._receipts and not self._in_flight:
            if self._soon is None:  # what else is acknowledged in this loop iteration joins
                self._soon = self._loop.call_soon(self._due)
        elif self._timer is None and self._soon is None:
            if self._group_time_s > 0:
                self._timer = self._loop.call_later(self._group_time_s, self._due)
            else:
                self._soon = self._loop.call_soon(self._due)
        return waiter

    def _due(self) -> None:
        self._soon = self._timer = None
        self.flush()

    def _answered(self, waiters: list[asyncio.Future[None]], groups: list, done: asyncio.Future) -> None:
        self._in_flight -= 1
        error = None if done.cancelled() else done.exception()
        if isinstance(error, MiniPulsarError) and error.retriable and self._retry_lost:
            # The connection went before the broker answered: the acknowledgements may not have
            # been stored. They wait here for the reconnection, and so do their waiters.
            for message_ids, ack_type in groups:
                for ledger_id, entry_id in message_ids:
                    if ack_type == "individual":
                        self._individual[(ledger_id, entry_id)] = None
                    elif self._cumulative is None or (ledger_id, entry_id) > self._cumulative:
                        self._cumulative = (ledger_id, entry_id)
            self._waiters[:0] = waiters
            if self._soon is None:
                self._soon = self._loop.call_soon(self._due)  # sent now if connected, else after attach
            return
        _resolve(waiters, done)
        if self._receipts and not self._in_flight and len(self) and self._soon is None:
            self._cancel_timers()
            self._soon = self._loop.call_soon(self._due)

    def _cancel_timers(self) -> None:
        for handle in (self._soon, self._timer):
            if handle is not None:
                handle.cancel()
        self._soon = self._timer = None

    def _groups(self) -> list[tuple[list[list[int]], AckType]]:
        groups: list[tuple[list[list[int]], AckType]] = []
        if self._individual:
            groups.append(([list(k) for k in self._individual], "individual"))
        if self._cumulative is not None:
            groups.append(([list(self._cumulative)], "cumulative"))
        return groups


def _resolved(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    future = loop.create_future()
    future.set_result(None)
    return future


def _resolve(waiters: list[asyncio.Future[None]], done: asyncio.Future) -> None:
    error = None if done.cancelled() else done.exception()
    for waiter in waiters:
        if waiter.done():
            continue
        if done.cancelled():
            waiter.cancel()
        elif error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(None)
