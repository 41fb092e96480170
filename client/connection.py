"""Client connections to brokers: one per broker address, shared by producers and consumers.

Broker pushes (SEND_RECEIPT, SEND_ERROR, MESSAGE, ACTIVE_CONSUMER_CHANGE, CLOSE_PRODUCER,
CLOSE_CONSUMER) are routed synchronously to the producer or consumer registered under their
id; nothing here awaits in the read path. A producer or consumer registers itself on the
connection it attached to and is told when that attachment ends, by one of two calls:

- ``closed_by_broker(assigned_broker_url)``: the broker closed this producer/consumer (its
  topic was unloaded); the URL of the new owner comes along when the broker knows it;
- ``connection_closed(reason)``: the whole connection is gone.

Either way the listener is unregistered first, so a late push cannot reach it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, Protocol

from minipulsar.client.exceptions import AlreadyClosed
from minipulsar.errors import MiniPulsarError
from minipulsar.net import Connection, connect
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.schema import Command
from minipulsar.supervision import guarded

log = logging.getLogger(__name__)

Address = tuple[str, int]


class ProducerListener(Protocol):
    def receipt_received(self, receipt: cmd.SendReceipt) -> None: ...
    def send_failed(self, error: cmd.SendError) -> None: ...
    def closed_by_broker(self, assigned_broker_url: str | None) -> None: ...
    def connection_closed(self, reason: MiniPulsarError) -> None: ...


class ConsumerListener(Protocol):
    def message_received(self, message: cmd.Message) -> None: ...
    def active_consumer_changed(self, is_active: bool) -> None: ...
    def closed_by_broker(self, assigned_broker_url: str | None) -> None: ...
    def connection_closed(self, reason: MiniPulsarError) -> None: ...


class ClientConnection(Connection):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.producers: dict[int, ProducerListener] = {}
        self.consumers: dict[int, ConsumerListener] = {}
        self.address: Address = ("?", 0)
        """The broker address this connection was opened to (the pool's key)."""

    def command_received(self, command: Command) -> None:
        match command:
            case cmd.SendReceipt():
                producer = self.producers.get(command.producer_id)
                if producer is not None:
                    producer.receipt_received(command)
            case cmd.Message():
                consumer = self.consumers.get(command.consumer_id)
                if consumer is not None:
                    consumer.message_received(command)
            case cmd.SendError():
                producer = self.producers.get(command.producer_id)
                if producer is not None:
                    producer.send_failed(command)
            case cmd.CloseProducer():
                closed_producer = self.producers.pop(command.producer_id, None)
                if closed_producer is not None:
                    closed_producer.closed_by_broker(command.assigned_broker_url)
            case cmd.ActiveConsumerChange():
                consumer = self.consumers.get(command.consumer_id)
                if consumer is not None:
                    consumer.active_consumer_changed(command.is_active)
            case cmd.CloseConsumer():
                closed_consumer = self.consumers.pop(command.consumer_id, None)
                if closed_consumer is not None:
                    closed_consumer.closed_by_broker(command.assigned_broker_url)
            case cmd.Error(id=None):
                log.warning("%s: broker error: %s %s", self.peer, command.code, command.message)
            case _ if command.RESPONSE:  # the answer to a request that already timed out
                log.debug("%s: late %s", self.peer, command.TYPE)
            case _:
                log.warning("%s: unexpected %s", self.peer, command.TYPE)

    def closed(self, reason: MiniPulsarError) -> None:
        listeners: list[ProducerListener | ConsumerListener] = [*self.producers.values(), *self.consumers.values()]
        self.producers.clear()
        self.consumers.clear()
        for listener in listeners:
            # One listener's bug must not keep the others attached.
            guarded(log, f"{self.peer}: a listener on connection loss", listener.connection_closed, reason)


class ConnectionPool:
    """One live connection per broker address, opened on demand and reopened after a drop.

    Concurrent ``get`` calls for an address that is being connected share one attempt.
    """

    def __init__(self, *, connection_timeout_s: float, operation_timeout_s: float, keepalive_interval_s: float) -> None:
        self._connection_timeout_s = connection_timeout_s
        self._operation_timeout_s = operation_timeout_s
        self._keepalive_interval_s = keepalive_interval_s
        self._connections: dict[Address, ClientConnection] = {}
        self._connecting: dict[Address, asyncio.Future[ClientConnection]] = {}
        self._closed = False

    async def get(self, host: str, port: int) -> ClientConnection:
        """The open connection to ``host:port``, connecting first if there is none.

        Raises:
            ConnectionClosedError: refused or dropped (the message names ``host:port``).
            RequestTimeoutError: no CONNECTED within ``connection_timeout_ms``.
            AlreadyClosed: the client is closed.
        """
        if self._closed:
            raise AlreadyClosed("the client is closed")
        key = (host, port)
        connection = self._connections.get(key)
        if connection is not None and connection.is_open:
            return connection
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._open(host, port))
            self._connecting[key] = pending
            pending.add_done_callback(functools.partial(self._attempt_done, key))
        return await asyncio.shield(pending)

    def _attempt_done(self, key: Address, attempt: asyncio.Future[ClientConnection]) -> None:
        """Forget the attempt; its failure reaches every ``get`` still awaiting it, and when
        none is (their callers gave up, or the client closed meanwhile) it is dropped here
        rather than logged by asyncio as "never retrieved"."""
        self._connecting.pop(key, None)
        if not attempt.cancelled():
            attempt.exception()

    async def _open(self, host: str, port: int) -> ClientConnection:
        connection = await connect(
            lambda: ClientConnection(
                request_timeout_s=self._operation_timeout_s, keepalive_interval_s=self._keepalive_interval_s
            ),
            host,
            port,
            timeout_s=self._connection_timeout_s,
        )
        connection.address = (host, port)
        if self._closed:  # the client closed while we were connecting
            connection.close()
            raise AlreadyClosed("the client is closed")
        self._connections[(host, port)] = connection
        return connection

    @property
    def connections(self) -> list[ClientConnection]:
        return [c for c in self._connections.values() if c.is_open]

    async def close(self) -> None:
        self._closed = True
        attempts = list(self._connecting.values())
        for pending in attempts:
            pending.cancel()
        await asyncio.gather(*attempts, return_exceptions=True)
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.close()
        await asyncio.gather(*(c.wait_closed() for c in connections), return_exceptions=True)
