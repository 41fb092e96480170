"""Helpers for the dispatch tests (no tests here): a raw-protocol producer that sends batch
entries — the client has no batching producer yet — and a raw consumer for non-durable
subscriptions (the broker's topic stats are in :mod:`tests.support.web`)."""

from __future__ import annotations

import asyncio
import itertools
import time

from minipulsar.net import Connection, connect
from minipulsar.net.client import parse_address
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import BatchMessage, encode_batch
from minipulsar.protocol.schema import Command
from tests.support.cluster import ProcessCluster

_ids = itertools.count(1)


class RawConnection(Connection):
    """A bare connection: answers SEND receipts by sequence id, collects MESSAGE pushes."""

    def __init__(self) -> None:
        super().__init__(request_timeout_s=20, keepalive_interval_s=30)
        self.receipts: dict[int, asyncio.Future[tuple[int, int]]] = {}
        self.messages: list[cmd.Message] = []

    def command_received(self, command: Command) -> None:
        if isinstance(command, cmd.SendReceipt):
            waiter = self.receipts.pop(command.sequence_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result((command.ledger_id, command.entry_id))
        elif isinstance(command, cmd.SendError):
            waiter = self.receipts.pop(command.sequence_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_exception(AssertionError(f"send failed: {command.code} {command.message}"))
        elif isinstance(command, cmd.Message):
            self.messages.append(command)


async def raw_connection(cluster: ProcessCluster) -> RawConnection:
    host, port = parse_address(cluster.service_url, 6650)
    return await connect(RawConnection, host, port)


class BatchProducer:
    """Publishes entries of ``count`` messages each, as a batching producer would."""

    def __init__(self, connection: RawConnection, topic: str) -> None:
        self.connection = connection
        self.topic = topic
        self.producer_id = next(_ids)
        self._sequence_ids = itertools.count()

    @classmethod
    async def create(cls, cluster: ProcessCluster, topic: str) -> BatchProducer:
        producer = cls(await raw_connection(cluster), topic)
        await producer.connection.request(
            cmd.Producer, topic=topic, producer_id=producer.producer_id, producer_name=f"batcher-{producer.producer_id}"
        )
        return producer

    async def send_batch(self, count: int, key: str | None = None, data: bytes = b"x") -> tuple[int, int]:
        """One entry of ``count`` messages; returns its (ledger_id, entry_id) once stored."""
        first = next(self._sequence_ids)
        for _ in range(count - 1):
            next(self._sequence_ids)
        payload = encode_batch(
            int(time.time() * 1000),
            f"batcher-{self.producer_id}",
            [BatchMessage(first + i, data, key) for i in range(count)],
        )
        waiter = asyncio.get_running_loop().create_future()
        self.connection.receipts[first] = waiter
        self.connection.send(
            cmd.Send(
                producer_id=self.producer_id,
                sequence_id=first,
                payload=payload,
                num_messages=count,
                highest_sequence_id=first + count - 1,
            )
        )
        return await waiter

    async def close(self) -> None:
        self.connection.close()
        await self.connection.wait_closed()
