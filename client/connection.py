"""Client connections to brokers: one per broker address, shared by producers and consumers.

Broker pushes (SEND_RECEIPT, SEND_ERROR, MESSAGE, CLOSE_*) are routed synchronously to the
producer or consumer registered under their id; nothing here awaits in the read path.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from minipulsar.errors import MiniPulsarError
from minipulsar.net import Connection, connect
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.schema import Command

log = logging.getLogger(__name__)


class ProducerListener(Protocol):
    def receipt_received(self, receipt: cmd.SendReceipt) -> None: ...
    def send_failed(self, error: cmd.SendError) -> None: ...
    def connection_closed(self, reason: MiniPulsarError) -> None: ...


class ConsumerListener(Protocol):
    def message_received(self, message: cmd.Message) -> None: ...
    def active_consumer_changed(self, is_active: bool) -> None: ...
    def connection_closed(self, reason: MiniPulsarError) -> None: ...


class ClientConnection(Connection):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.producers: dict[int, ProducerListener] = {}
        self.consumers: dict[int, ConsumerListener] = {}

    def command_received(self, command: Command) -> None:
        kind = type(command)
        if kind is cmd.SendReceipt:
            producer = self.producers.get(command.producer_id)  # type: ignore[attr-defined]
            if producer is not None:
                producer.receipt_received(command)  # type: ignore[arg-type]
        elif kind is cmd.Message:
            consumer = self.consumers.get(command.consumer_id)  # type: ignore[attr-defined]
            if consumer is not None:
                consumer.message_received(command)  # type: ignore[arg-type]
        elif kind is cmd.SendError:
            producer = self.producers.get(command.producer_id)  # type: ignore[attr-defined]
            if producer is not None:
                producer.send_failed(command)  # type: ignore[arg-type]
        elif kind is cmd.CloseProducer:
            listener = self.producers.pop(command.producer_id, None)  # type: ignore[attr-defined]
            if listener is not None:
                listener.connection_closed(MiniPulsarError("the broker closed the producer"))
        elif kind is cmd.ActiveConsumerChange:
            consumer = self.consumers.get(command.consumer_id)  # type: ignore[attr-defined]
            if consumer is not None:
                consumer.active_consumer_changed(command.is_active)  # type: ignore[attr-defined]
        elif kind is cmd.CloseConsumer:
            listener = self.consumers.pop(command.consumer_id, None)  # type: ignore[attr-defined]
            if listener is not None:
                listener.connection_closed(MiniPulsarError("the broker closed the consumer"))
        elif kind is cmd.Error and command.id is None:  # type: ignore[attr-defined]
            log.warning("%s: broker error: %s %s", self.peer, command.code, command.message)  # type: ignore[attr-defined]
        elif command.RESPONSE:  # the answer to a request that already timed out
            log.debug("%s: late %s", self.peer, command.TYPE)
        else:
            log.warning("%s: unexpected %s", self.peer, command.TYPE)

    def closed(self, reason: MiniPulsarError) -> None:
        listeners = [*self.producers.values(), *self.consumers.values()]
        self.producers.clear()
        self.consumers.clear()
        for listener in listeners:
            listener.connection_closed(reason)


class ConnectionPool:
    """One live connection per broker address, opened on demand and reopened after a drop."""

    def __init__(self, *, connection_timeout_s: float, operation_timeout_s: float,
                 keepalive_interval_s: float) -> None:
        self._connection_timeout_s = connection_timeout_s
        self._operation_timeout_s = operation_timeout_s
        self._keepalive_interval_s = keepalive_interval_s
        self._connections: dict[tuple[str, int], ClientConnection] = {}
        self._connecting: dict[tuple[str, int], asyncio.Future[ClientConnection]] = {}

    async def get(self, host: str, port: int) -> ClientConnection:
        key = (host, port)
        connection = self._connections.get(key)
        if connection is not None and connection.is_open:
            return connection
        pending = self._connecting.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._open(host, port))
            self._connecting[key] = pending
            pending.add_done_callback(lambda _: self._connecting.pop(key, None))
        return await asyncio.shield(pending)

    async def _open(self, host: str, port: int) -> ClientConnection:
        connection = await connect(
            lambda: ClientConnection(request_timeout_s=self._operation_timeout_s,
                                     keepalive_interval_s=self._keepalive_interval_s),
            host, port, timeout_s=self._connection_timeout_s)
        self._connections[(host, port)] = connection
        return connection

    async def close(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.close()
        await asyncio.gather(*(c.wait_closed() for c in connections), return_exceptions=True)
