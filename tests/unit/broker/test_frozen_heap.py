"""Goal: loaded topics leave the garbage collector's scans — one freeze per burst of loads
(within the delay), and taking topics out to close them unfreezes, so their cycles can be
collected. Method: FrozenHeap with a zero delay on the test's loop, gc.get_freeze_count()."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from minipulsar.broker.topics.frozen_heap import FrozenHeap
from minipulsar.broker.topics.registry import TopicMap
from minipulsar.topic_name import TopicName


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # leave the test process's collector as it was


async def test_a_burst_of_loads_freezes_once_and_an_unload_unfreezes() -> None:
    heap = FrozenHeap(delay_s=0.0)
    for _ in range(100):
        heap.loaded()
    await asyncio.sleep(0)  # the loop runs the one pending freeze (delay 0)
    await asyncio.sleep(0)
    assert heap.freezes == 1
    assert gc.get_freeze_count() > 0
    topics = TopicMap(on_taken=heap.unloaded)
    future: asyncio.Future = asyncio.get_running_loop().create_future()
    topics.put(TopicName.parse("persistent://t/ns/a"), future)
    assert topics.take_topics(lambda name: False) == [], "nothing taken: nothing unfrozen"
    assert gc.get_freeze_count() > 0
    assert topics.take_topics(lambda name: True) == [future]
    assert gc.get_freeze_count() == 0
    heap.close()
