"""Goal: the producer's send path as pure logic, against a fake connection: a batch's messages
complete once each, in order, with their batch index; a raising callback does not stop the
others; the entry bytes are protocol.batch's; application ids that do not increase start a
new entry; a producer that becomes full seals its batch at once; flush waits for every pending
entry; memory and the pending count return to zero."""

from __future__ import annotations

import asyncio
import itertools

import msgpack
import pytest

from minipulsar.client.memory_limit import MemoryLimitController
from minipulsar.client.message_id import MessageId, batch_message_ids
from minipulsar.client.producer import Producer
from minipulsar.client.producer_config import ProducerConfig
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import BatchMessage, encode_batch


class ReceiptingConnection:
    """Keeps every SEND; ``answer()`` sends their receipts (entry ids 0, 1, …)."""

    def __init__(self) -> None:
        self.sent: list[cmd.Send] = []
        self.producers: dict = {}
        self._entries = itertools.count()
        self.producer: Producer | None = None

    def send(self, command: cmd.Send) -> None:
        self.sent.append(command)

    def answer(self) -> None:
        sent, self.sent = self.sent, []
        assert self.producer is not None
        for command in sent:
            self.producer.receipt_received(
                cmd.SendReceipt(
                    producer_id=command.producer_id,
                    sequence_id=command.sequence_id,
                    ledger_id=7,
                    entry_id=next(self._entries),
                )
            )


def attached_producer(memory: MemoryLimitController, **settings) -> tuple[Producer, ReceiptingConnection]:
    config = ProducerConfig.from_settings(producer_name="p", batching_max_publish_delay_ms=1000, **settings)
    producer = Producer(
        "persistent://public/default/t", config, pool=None, lookup=None, memory=memory, operation_timeout_s=5
    )  # type: ignore[arg-type]
    connection = ReceiptingConnection()
    connection.producer = producer
    producer._connection = connection  # type: ignore[assignment]
    return producer, connection


@pytest.mark.parametrize("max_pending", [0, 1000])
async def test_a_batch_completes_each_message_once_in_order_with_its_index(max_pending: int) -> None:
    """With max_pending_messages=1000 the 1500 others wait and are taken, in order, as
    receipts make room."""
    memory = MemoryLimitController()
    producer, connection = attached_producer(memory, batching_max_messages=1000, max_pending_messages=max_pending)
    outcomes: list[tuple[int, object, MessageId | None]] = []
    for i in range(2500):
        producer.send_async(b"%d" % i, lambda error, message_id, i=i: outcomes.append((i, error, message_id)))
    for _ in range(3):
        producer._seal()
        connection.answer()
    assert [i for i, _, _ in outcomes] == list(range(2500))
    assert all(error is None for _, error, _ in outcomes)
    assert outcomes[1001][2] == MessageId(-1, 7, 1, 1) and outcomes[2499][2] == MessageId(-1, 7, 2, 499)
    assert memory.used_bytes == 0 and producer._outstanding == 0 and not producer._pending
    assert producer.last_sequence_id() == 2499


@pytest.mark.expect_error_log(r"a send_async callback failed")
async def test_a_raising_callback_does_not_stop_the_other_messages_of_its_entry() -> None:
    producer, connection = attached_producer(MemoryLimitController())
    done: list[int] = []

    def callback(i: int) -> object:
        def complete(error: object, message_id: MessageId | None) -> None:
            done.append(i)
            if i % 3 == 1:
                raise RuntimeError("the application's bug")

        return complete

    for i in range(7):
        producer.send_async(b"x", callback(i))
    producer._seal()
    connection.answer()
    assert done == list(range(7))


async def test_the_entry_is_the_batch_format_byte_for_byte() -> None:
    producer, connection = attached_producer(MemoryLimitController())
    producer.send_async(b"a", lambda e, m: None)
    producer.send_async(None, lambda e, m: None, partition_key="k", properties={"x": "y"}, event_timestamp=5)
    producer.send_async(b"c", lambda e, m: None, ordering_key="o")
    producer._seal()
    (send,) = connection.sent
    fields = msgpack.unpackb(send.payload)
    expected = encode_batch(
        fields[1],
        "p",
        [BatchMessage(0, b"a"), BatchMessage(1, None, "k", {"x": "y"}, 5), BatchMessage(2, b"c", ordering_key="o")],
    )
    assert send.payload == expected
    assert send.payload == msgpack.packb(
        [3, fields[1], "p", [[0, b"a", None, None, 0], [1, None, "k", {"x": "y"}, 5], [2, b"c", None, None, 0, "o"]]]
    )
    assert (send.sequence_id, send.highest_sequence_id, send.num_messages) == (0, 2, 3)


async def test_application_ids_that_do_not_increase_start_a_new_entry() -> None:
    producer, connection = attached_producer(MemoryLimitController())
    for sequence_id in (5, 6, 2, 3):
        producer.send_async(b"x", lambda e, m: None, sequence_id=sequence_id)
    producer.send_async(b"auto", lambda e, m: None)
    producer._seal()
    assert [(s.sequence_id, s.highest_sequence_id) for s in connection.sent] == [(5, 6), (2, 3), (0, 0)]


async def test_a_batch_is_sealed_at_once_when_the_producer_becomes_full() -> None:
    """Once the producer holds max_pending_messages nothing can join the open batch until a
    receipt frees room: it goes out at once instead of after the batch delay (1 s here)."""
    producer, connection = attached_producer(
        MemoryLimitController(), batching_max_messages=1000, max_pending_messages=10, block_if_queue_full=True
    )
    for i in range(15):
        producer.send_async(b"%d" % i, lambda e, m: None)
    assert [s.num_messages for s in connection.sent] == [10], "full after the 10th: sealed without the timer"
    connection.answer()  # room for 10: the 5 waiting are taken and the batch stays open for more
    assert not connection.sent and producer._outstanding == 5
    for i in range(4):
        producer.send_async(b"%d" % i, lambda e, m: None)
    assert not connection.sent
    producer.send_async(b"last", lambda e, m: None)
    assert [s.num_messages for s in connection.sent] == [10] and producer._outstanding == 10


async def test_flush_waits_for_every_pending_entry() -> None:
    producer, connection = attached_producer(MemoryLimitController(), batching_enabled=False)
    results: list[object] = []
    for _ in range(3):
        producer.send_async(b"x", lambda error, message_id: results.append(message_id))
    flushed = asyncio.ensure_future(producer.flush())
    await asyncio.sleep(0)
    assert not flushed.done() and len(connection.sent) == 3
    connection.answer()
    await asyncio.wait_for(flushed, 5)
    assert results == [MessageId(-1, 7, n, -1) for n in range(3)], "unbatched: no batch index"


def test_batch_message_ids_are_the_constructors() -> None:
    assert batch_message_ids(3, 4, 3) == [MessageId(-1, 3, 4, i) for i in range(3)]
    assert batch_message_ids(3, 4, 2)[1].batch_index() == 1 and batch_message_ids(3, 4, 1)[0].topic_name() is None
