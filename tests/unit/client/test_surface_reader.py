"""Reader over a fake consumer: Pulsar's start-id rules (exclusive / inclusive, batch
indexes), no duplicates after a resubscription, has_message_available, seek, background acks."""

from __future__ import annotations

import pytest

from minipulsar.client.exceptions import Timeout
from minipulsar.client.message_id import MessageId
from minipulsar.client.reader import Reader
from tests.support.client_fakes import FakeConsumer, make_message
from tests.support.process import wait_for

TOPIC = "persistent://public/default/r"


def batch_messages(ledger_id: int, entry_id: int, size: int) -> list:
    return [make_message(TOPIC, ledger_id, entry_id, i) for i in range(size)]


async def reader_from(
    start: MessageId, *messages, inclusive: bool = False, last: MessageId | None = None
) -> tuple[Reader, FakeConsumer]:
    consumer = FakeConsumer(TOPIC)
    consumer.push(*messages)
    if last is not None:
        consumer.last_message_id = last
    reader = await Reader.create(consumer, start, inclusive=inclusive, operation_timeout_s=0.2)
    return reader, consumer


async def read_until_quiet(reader: Reader) -> list[tuple[int, int, int]]:
    out = []
    while True:
        try:
            message = await reader.read_next(timeout_millis=20)
        except Timeout:
            return out
        out.append(
            (message.message_id().ledger_id(), message.message_id().entry_id(), message.message_id().batch_index())
        )


@pytest.mark.parametrize("inclusive, expected", [(False, [(1, 3, -1)]), (True, [(1, 2, -1), (1, 3, -1)])])
async def test_start_at_a_plain_message_is_exclusive_unless_asked(inclusive: bool, expected: list) -> None:
    """The broker starts at the start entry; the reader drops it unless inclusive."""
    reader, _ = await reader_from(
        MessageId(-1, 1, 2), make_message(TOPIC, 1, 2), make_message(TOPIC, 1, 3), inclusive=inclusive
    )
    assert await read_until_quiet(reader) == expected


@pytest.mark.parametrize("inclusive, first_index", [(False, 2), (True, 1)])
async def test_start_inside_a_batch_skips_the_members_before_it(inclusive: bool, first_index: int) -> None:
    reader, _ = await reader_from(
        MessageId(-1, 4, 0, 1), *batch_messages(4, 0, 4), make_message(TOPIC, 4, 1), inclusive=inclusive
    )
    assert await read_until_quiet(reader) == [(4, 0, i) for i in range(first_index, 4)] + [(4, 1, -1)]


async def test_a_start_id_without_batch_index_covers_its_whole_batch() -> None:
    reader, _ = await reader_from(MessageId(-1, 4, 0), *batch_messages(4, 0, 3), make_message(TOPIC, 4, 1))
    assert await read_until_quiet(reader) == [(4, 1, -1)]


async def test_earliest_and_latest_filter_nothing() -> None:
    reader, _ = await reader_from(MessageId.earliest, make_message(TOPIC, 1, 0), *batch_messages(1, 1, 2))
    assert await read_until_quiet(reader) == [(1, 0, -1), (1, 1, 0), (1, 1, 1)]
    reader, _ = await reader_from(MessageId.latest, make_message(TOPIC, 9, 9), last=MessageId(-1, 9, 8))
    assert await read_until_quiet(reader) == [(9, 9, -1)]


async def test_messages_delivered_again_after_a_resubscription_are_not_read_twice() -> None:
    reader, consumer = await reader_from(MessageId.earliest, *batch_messages(1, 0, 2), make_message(TOPIC, 1, 1))
    assert await read_until_quiet(reader) == [(1, 0, 0), (1, 0, 1), (1, 1, -1)]
    consumer.push(
        *batch_messages(1, 0, 2), make_message(TOPIC, 1, 1), make_message(TOPIC, 1, 2)
    )  # from an earlier entry
    assert await read_until_quiet(reader) == [(1, 2, -1)]


async def test_read_messages_are_acknowledged_cumulatively_in_the_background() -> None:
    reader, consumer = await reader_from(MessageId.earliest, *(make_message(TOPIC, 1, i) for i in range(5)))
    await read_until_quiet(reader)
    await wait_for(lambda: consumer.cumulative and consumer.cumulative[-1] == MessageId(-1, 1, 4), timeout_s=5)
    assert consumer.cumulative == sorted(consumer.cumulative), "acks only move forward"


async def test_has_message_available_compares_the_brokers_last_entry_with_what_was_read() -> None:
    reader, consumer = await reader_from(MessageId.earliest, last=MessageId(-1, 0, -1))
    assert not await reader.has_message_available(), "an empty topic"
    consumer.last_message_id = MessageId(-1, 1, 1)
    assert await reader.has_message_available(), "entries exist; the broker will deliver them"
    consumer.push(make_message(TOPIC, 1, 0), *batch_messages(1, 1, 2))
    assert (await reader.read_next(1000)).message_id().entry_id() == 0
    assert (await reader.read_next(1000)).message_id().batch_index() == 0
    assert await reader.has_message_available(), "the rest of a batch read halfway is queued"
    assert (await reader.read_next(1000)).message_id().batch_index() == 1
    assert not await reader.has_message_available(), "read up to the broker's last entry"


async def test_has_message_available_after_an_exclusive_start_at_the_last_message_is_false() -> None:
    reader, _ = await reader_from(MessageId(-1, 3, 7), make_message(TOPIC, 3, 7), last=MessageId(-1, 3, 7))
    assert not await reader.has_message_available()
    reader, _ = await reader_from(
        MessageId(-1, 3, 7), make_message(TOPIC, 3, 7), last=MessageId(-1, 3, 7), inclusive=True
    )
    assert await reader.has_message_available()
    reader, _ = await reader_from(MessageId(-1, 3, 7, 0), *batch_messages(3, 7, 2), last=MessageId(-1, 3, 7))
    assert await reader.has_message_available(), "index 1 follows the start inside the batch"
    assert (await reader.read_next(1000)).message_id().batch_index() == 1


async def test_seek_moves_the_consumer_and_restarts_the_rules() -> None:
    reader, consumer = await reader_from(MessageId.earliest, *(make_message(TOPIC, 1, i) for i in range(3)))
    assert len(await read_until_quiet(reader)) == 3
    await reader.seek(MessageId(-1, 1, 0))
    assert consumer.seeks == [MessageId(-1, 1, 0)]
    consumer.push(*(make_message(TOPIC, 1, i) for i in range(3)))  # the broker restarts at entry 0
    assert await read_until_quiet(reader) == [(1, 1, -1), (1, 2, -1)], "exclusive: entry 0 is skipped again"
    await reader.seek(1_700_000_000_000)
    assert consumer.seeks[-1] == 1_700_000_000_000
    with pytest.raises(TypeError):
        await reader.seek("yesterday")
