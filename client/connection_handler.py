"""ConnectionHandler: keeps one producer or consumer attached to the broker serving its topic.

Pulsar's ``ConnectionHandler``, shared by producers and consumers. The owner (a Producer or
Consumer) knows how to *attach* to a connection — send PRODUCER / SUBSCRIBE and then resend
its pending messages / re-grant its permits — and tells the handler when the attachment ends
(:meth:`ConnectionHandler.detached`: the connection dropped, or the broker sent CLOSE_PRODUCER /
CLOSE_CONSUMER because the topic moved). The handler does the rest:

1. wait a backoff delay (100 ms doubling to 30 s, with jitter), except when the broker named the
   new owner (``assigned_broker_url``, PIP-307): then go straight there;
2. look the topic up again (its owner may have changed) and get the pooled connection;
3. ``await owner.attach(connection, timeout_s)``; on a retriable failure go back to 1.

Creation (:meth:`start`) is the same loop bounded by ``operation_timeout_seconds``, and any
error that is not retriable (ProducerBusy, ConsumerBusy, TopicNotFound, …) fails it at once.
After creation the handler retries forever — a producer's pending messages are bounded by
their own send timeout — except for errors that can never heal (the topic is gone, the client
is closed, we are not authorised), which it hands to ``owner.attach_failed``.

Invariant: at most one reconnection task runs; an attachment that ended while it was being
made (the epoch moved) does not count as made.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from typing import TYPE_CHECKING, Protocol

from minipulsar.client.backoff import Backoff
from minipulsar.client.exceptions import AlreadyClosed
from minipulsar.client.retry import retry_until
from minipulsar.client.service_url import DEFAULT_PORT
from minipulsar.errors import (
    AuthenticationError,
    AuthorizationError,
    ConnectionClosedError,
    InvalidCommandError,
    MiniPulsarError,
    TopicNotFoundError,
)
from minipulsar.net import parse_address

if TYPE_CHECKING:
    from minipulsar.client.connection import ClientConnection, ConnectionPool
    from minipulsar.client.lookup import LookupService

from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

FATAL_AFTER_CREATION = (TopicNotFoundError, AuthenticationError, AuthorizationError, InvalidCommandError, AlreadyClosed)
"""Errors that end an established producer or consumer instead of being retried."""


class Attachable(Protocol):
    async def attach(self, connection: ClientConnection, timeout_s: float) -> None:
        """Register on ``connection`` (PRODUCER / SUBSCRIBE) and restore the state the broker
        must know; raise to have the handler retry (or give up, see the module docstring)."""

    def attach_failed(self, error: MiniPulsarError) -> None:
        """Reconnection gave up for good: fail what is pending and close."""


class HandlerState(enum.Enum):
    CREATING = "creating"
    READY = "ready"
    RECONNECTING = "reconnecting"
    CLOSED = "closed"


class ConnectionHandler:
    def __init__(
        self,
        owner: Attachable,
        topic: str,
        pool: ConnectionPool,
        lookup: LookupService,
        *,
        operation_timeout_s: float,
        description: str,
    ) -> None:
        self._owner = owner
        self.topic = topic
        self._pool = pool
        self._lookup = lookup
        self._operation_timeout_s = operation_timeout_s
        self.description = description
        self.connection: ClientConnection | None = None
        self.state = HandlerState.CREATING
        self._epoch = 0
        self._backoff = Backoff()
        self._task: asyncio.Task[None] | None = None
        self.reconnections = 0
        """Attachments made after the first one: for tests and stats."""

    @property
    def is_connected(self) -> bool:
        connection = self.connection
        return self.state is HandlerState.READY and connection is not None and connection.is_open

    async def start(self) -> None:
        """The first attachment, retried until ``operation_timeout_seconds``.

        Raises:
            MiniPulsarError: a non-retriable error at once, or the last one at the deadline.
        """
        deadline = time.monotonic() + self._operation_timeout_s
        await retry_until(
            deadline, lambda remaining_s: self._attach_once(remaining_s, None), Backoff(), f"create {self.description}"
        )
        self.state = HandlerState.READY

    def detached(self, assigned_broker_url: str | None = None) -> None:
        """The owner lost its attachment; reconnect in the background (once)."""
        self._epoch += 1
        self.connection = None
        if self.state is HandlerState.CREATING or self.state is HandlerState.CLOSED:
            return  # start() retries by itself; a closed owner stays closed
        self.state = HandlerState.RECONNECTING
        if self._task is None:
            self._task = spawn(self._reconnect(assigned_broker_url), name=f"reconnect {self.description}", logger=log)

    def close(self) -> None:
        self.state = HandlerState.CLOSED
        self._epoch += 1
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _attach_once(self, timeout_s: float, assigned_broker_url: str | None) -> None:
        epoch = self._epoch
        if assigned_broker_url:
            address = parse_address(assigned_broker_url, DEFAULT_PORT)
        else:
            address = await self._lookup.find_broker(self.topic)
        connection = await self._pool.get(*address)
        await self._owner.attach(connection, timeout_s)
        if self._epoch != epoch or not connection.is_open:
            raise ConnectionClosedError(
                f"{self.description}: the connection to {connection.peer} ended while attaching"
            )
        self.connection = connection

    async def _reconnect(self, assigned_broker_url: str | None) -> None:
        try:
            delay_s = 0.0 if assigned_broker_url else self._backoff.next()
            while self.state is HandlerState.RECONNECTING:
                await asyncio.sleep(delay_s)
                try:
                    await self._attach_once(self._operation_timeout_s, assigned_broker_url)
                except FATAL_AFTER_CREATION as error:
                    log.warning("%s: cannot reconnect: %s", self.description, error)
                    self.state = HandlerState.CLOSED
                    self._owner.attach_failed(error)
                    return
                except (MiniPulsarError, TimeoutError) as error:  # the broker or the network, for now
                    delay_s = self._backoff.next()
                    log.info(
                        "%s: reconnection failed (%s: %s); next attempt in %.2fs",
                        self.description,
                        type(error).__name__,
                        error,
                        delay_s,
                    )
                    assigned_broker_url = None  # the named broker did not take us: look up again
                    continue
                self._backoff.reset()
                self.reconnections += 1
                self.state = HandlerState.READY
                log.info("%s: reconnected to %s", self.description, self.connection.peer if self.connection else "?")
                return
        finally:
            self._task = None
