"""The client consumer's side of dispatch, over a fake connection: batch-aware acks, negative
acks batched into one REDELIVER_UNACKED, full redelivery on Exclusive, permits around seek."""

from __future__ import annotations

import pytest

from minipulsar.client.consumer import Consumer
from minipulsar.client.consumer_config import ConsumerConfig
from minipulsar.client.exceptions import CumulativeAcknowledgementNotAllowedError
from minipulsar.client.message import MessageId
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.batch import BatchMessage, encode_batch
from tests.support.broker_fakes import FakeConnection
from tests.support.process import wait_for


def consumer(sub_type: str = "Exclusive", **kwargs) -> tuple[Consumer, FakeConnection]:
    """A consumer attached to a fake connection (as after a SUBSCRIBE, before its first FLOW)."""
    connection = FakeConnection()
    options = {"receiver_queue_size": 10, "consumer_name": "c", "initial_position": "Latest", **kwargs}
    target = Consumer(
        "persistent://public/default/t",
        "sub",
        ConsumerConfig(consumer_type=sub_type, **options),
        pool=None,
        lookup=None,
        operation_timeout_s=30,
    )  # type: ignore[arg-type]  # the client takes a concrete pool and lookup; none is needed here
    target._connection = connection  # type: ignore[assignment]  # a concrete ClientConnection in the client
    connection.consumers[target._consumer_id] = target
    return target, connection


def push(target: Consumer, entry_id: int, count: int = 1) -> None:
    payload = encode_batch(1, "p", [BatchMessage(i, f"{entry_id}.{i}".encode()) for i in range(count)])
    target.message_received(cmd.Message(consumer_id=1, ledger_id=3, entry_id=entry_id, payload=payload))


def acks(connection: FakeConnection) -> list[tuple[str, list]]:
    return [(f["ack_type"], f["message_ids"]) for cls, f in connection.requests if cls is cmd.Ack]


async def test_a_batch_is_acknowledged_on_the_wire_once_all_its_messages_are() -> None:
    target, connection = consumer()
    push(target, 4, count=3)
    messages = [await target.receive() for _ in range(3)]
    for message in messages[:2]:
        await target.acknowledge(message)
    assert acks(connection) == []
    await target.acknowledge(messages[2])
    assert acks(connection) == [("individual", [[3, 4]])]


async def test_cumulative_ack_in_the_middle_of_a_batch_covers_only_the_entries_before() -> None:
    target, connection = consumer()
    push(target, 4)
    push(target, 5, count=3)
    messages = [await target.receive() for _ in range(4)]
    await target.acknowledge_cumulative(messages[2])  # 5.1 of 5.0-5.2
    await target.acknowledge_cumulative(messages[3])  # 5.2: the batch is covered
    assert acks(connection) == [("cumulative", [[3, 4]]), ("cumulative", [[3, 5]])]


async def test_cumulative_ack_is_refused_on_shared_subscriptions() -> None:
    for sub_type in ("Shared", "Key_Shared"):
        target, _ = consumer(sub_type)
        with pytest.raises(CumulativeAcknowledgementNotAllowedError):
            await target.acknowledge_cumulative(MessageId(-1, 3, 4, -1))


async def test_negative_acks_go_out_together_in_one_redeliver_after_the_delay() -> None:
    target, connection = consumer("Shared", negative_ack_redelivery_delay_ms=30)
    for entry_id in range(3):
        push(target, entry_id)
    for _ in range(3):
        target.negative_acknowledge(await target.receive())
    assert connection.of(cmd.RedeliverUnacked) == []
    await wait_for(lambda: connection.of(cmd.RedeliverUnacked), timeout_s=5, interval_s=0.01)
    [redeliver] = connection.of(cmd.RedeliverUnacked)
    assert redeliver.message_ids == [[3, 0], [3, 1], [3, 2]]


async def test_negative_ack_on_exclusive_asks_for_everything_and_returns_queued_permits() -> None:
    target, connection = consumer("Exclusive", negative_ack_redelivery_delay_ms=10)
    for entry_id in range(8):
        push(target, entry_id)
    target.negative_acknowledge(await target.receive())
    await wait_for(lambda: connection.of(cmd.RedeliverUnacked), timeout_s=5, interval_s=0.01)
    assert connection.of(cmd.RedeliverUnacked)[0].message_ids is None
    assert len(target._queue) == 0
    assert sum(f.permits for f in connection.of(cmd.Flow)) == 8  # 1 received + 7 dropped


async def test_seek_holds_permits_back_and_grants_the_whole_queue_afterwards() -> None:
    target, connection = consumer(receiver_queue_size=4)
    for entry_id in range(4):
        push(target, entry_id)
    await target.receive()
    await target.seek(MessageId(-1, 3, 0, -1))
    assert [(cls, f.get("ledger_id"), f.get("entry_id")) for cls, f in connection.requests] == [(cmd.Seek, 3, 0)]
    assert len(target._queue) == 0
    assert [f.permits for f in connection.of(cmd.Flow)] == [4]
    await target.seek(1_700_000_000_000)
    assert connection.requests[-1][1] == {"consumer_id": target._consumer_id, "publish_time_ms": 1_700_000_000_000}
