"""Retrying an operation until its deadline, and the error reported when it never succeeds.

Lookups, partition metadata and producer/consumer creation are retried with backoff while
their errors are retriable (connection refused or dropped, request timeout, ServiceNotReady,
TooManyRequests, NotOwner, a failed lookup …), until the operation's own deadline (PIP-91:
``lookup_timeout_ms``; ``operation_timeout_seconds`` for creation). What the caller gets in the
end names the root cause — the last attempt's error, of the same class, with how long we
tried — not a bare "timed out" (apache/pulsar#13664, #16594).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from minipulsar.client.backoff import Backoff
from minipulsar.client.exceptions import Timeout
from minipulsar.errors import MiniPulsarError

log = logging.getLogger(__name__)

T = TypeVar("T")

LAST_ATTEMPT_S_MIN = 0.1
"""Less time than this left: give up rather than start another attempt (Pulsar: 100 ms)."""


def gave_up_error(context: str, last: BaseException | None, waited_s: float) -> MiniPulsarError:
    """The error for an operation abandoned after ``waited_s``: the last attempt's error class
    with a message that says what failed, why, and for how long we tried."""
    if last is None:
        return Timeout(f"{context}: no answer within {waited_s:.1f}s")
    message = f"{context}: {last} (gave up after {waited_s:.1f}s)"
    if isinstance(last, MiniPulsarError):
        try:
            error = type(last)(message)
        except TypeError:  # a class with another constructor
            error = Timeout(message)
    else:
        error = Timeout(message)
    error.__cause__ = last
    return error


async def retry_until(deadline: float, attempt: Callable[[float], Awaitable[T]], backoff: Backoff, context: str) -> T:
    """``await attempt(remaining_s)`` until it succeeds, retrying retriable errors with backoff.

    Raises:
        MiniPulsarError: a non-retriable error at once; else, past ``deadline`` (monotonic),
            :func:`gave_up_error` of the last error.
    """
    started = time.monotonic()
    last: BaseException | None = None
    last_refusal: MiniPulsarError | None = None  # the root cause a later timeout must not hide
    while True:
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise gave_up_error(context, last, time.monotonic() - started)
        try:
            return await attempt(remaining_s)
        except TimeoutError:
            message = f"no answer within {remaining_s:.1f}s"
            if last_refusal is not None:
                message += f"; the attempt before failed: {last_refusal}"
            last = Timeout(message)
        except MiniPulsarError as error:
            if not error.retriable:
                raise
            last = last_refusal = error
        remaining_s = deadline - time.monotonic()
        if remaining_s <= LAST_ATTEMPT_S_MIN:
            raise gave_up_error(context, last, time.monotonic() - started)
        # Pulsar sleeps min(backoff, remaining time); we keep LAST_ATTEMPT_S_MIN of it for the
        # attempt after the sleep, which would otherwise start with no time and only time out.
        delay_s = min(backoff.next(), remaining_s - LAST_ATTEMPT_S_MIN)
        log.debug("%s: %s; retrying in %.2fs", context, last, delay_s)
        await asyncio.sleep(delay_s)
