"""Goal: WaitForExclusive turns are granted in arrival order, one at a time, only while the
topic has no producer, and a producer that gives up passes its turn on.

Method: an ExclusiveQueue over a set of attached producers that the test fills and empties.
"""

from __future__ import annotations

import asyncio

from minipulsar.broker.topics.exclusive_queue import ExclusiveQueue


class Topic:
    def __init__(self, *producers: str) -> None:
        self.producers = set(producers)
        self.attached: list[str] = []
        self.queue = ExclusiveQueue(lambda: bool(self.producers))

    def leave(self, name: str) -> None:
        self.producers.discard(name)
        self.queue.grant_next()

    async def queue_up(self, name: str) -> asyncio.Task[None]:
        """A producer ``name`` that queues (the task returned once it is in line), then
        attaches when its turn comes."""
        queued = asyncio.Event()

        async def producer() -> None:
            async with self.queue.turn() as turn:
                queued.set()
                await turn
                self.producers.add(name)
                self.attached.append(name)

        task = asyncio.create_task(producer())
        await queued.wait()
        return task


async def test_a_free_topic_grants_the_turn_at_once() -> None:
    topic = Topic()
    async with topic.queue.turn() as turn:
        assert turn.done()
    assert not topic.queue


async def test_turns_come_in_arrival_order_once_the_topic_is_free() -> None:
    topic = Topic("holder")
    first = await topic.queue_up("first")
    second = await topic.queue_up("second")
    assert len(topic.queue) == 2 and not topic.attached
    topic.leave("holder")
    await first
    assert topic.attached == ["first"] and not second.done()  # the topic has a producer again
    topic.leave("first")
    await second
    assert topic.attached == ["first", "second"] and not topic.queue


async def test_a_producer_that_gives_up_passes_its_turn_on() -> None:
    topic = Topic("holder")
    first = await topic.queue_up("first")
    second = await topic.queue_up("second")
    topic.leave("holder")  # first's turn, but it is closed before it runs
    first.cancel()
    await second
    assert first.cancelled() and topic.attached == ["second"] and not topic.queue
