"""Goal: an unloaded topic's clients are handled in the order that keeps acknowledged messages:
producers and consumers are detached first, the topic closes only once the
sends already persisting have completed (their receipts go out before any CLOSE), and the
CLOSE_PRODUCER / CLOSE_CONSUMER come last, naming the new owner when there is one.

Method: broker/namespace/unload.py on fake topics and connections that record every call."""

from __future__ import annotations

import asyncio

from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.namespace.unload import close_topics
from tests.support.broker_fakes import FakeConnection, UnloadingTopic


async def test_the_topic_closes_after_the_persisting_sends_and_clients_hear_last() -> None:
    log: list[str] = []
    connection = FakeConnection(log)
    in_flight: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
    loaded: asyncio.Future[UnloadingTopic] = asyncio.get_running_loop().create_future()
    loaded.set_result(UnloadingTopic(log, connection, in_flight))
    in_flight.add_done_callback(lambda _: log.append("receipt sent"))
    # the bookies answer a moment after the detach
    connection.on_detach_producer = lambda _: asyncio.get_running_loop().call_later(
        0.05, in_flight.set_result, Position(7, 0)
    )
    detached = await close_topics([loaded], drain_timeout_s=10)
    assert log == ["detach producer 1", "detach consumer 7", "receipt sent", "topic closed"]
    detached.notify("pulsar://new-owner:6650")
    assert log[-2:] == ["CLOSE_PRODUCER 1 pulsar://new-owner:6650", "CLOSE_CONSUMER 7 pulsar://new-owner:6650"]


async def test_a_send_that_never_completes_delays_the_close_only_until_the_drain_timeout() -> None:
    log: list[str] = []
    connection = FakeConnection(log)
    stuck: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
    loaded: asyncio.Future[UnloadingTopic] = asyncio.get_running_loop().create_future()
    loaded.set_result(UnloadingTopic(log, connection, stuck))
    detached = await close_topics([loaded], drain_timeout_s=0.05)
    assert log[-1] == "topic closed" and len(detached.producers) == 1


async def test_a_topic_that_failed_to_load_is_skipped() -> None:
    failed: asyncio.Future[UnloadingTopic] = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("could not open the managed ledger"))
    detached = await close_topics([failed], drain_timeout_s=1)
    assert detached.producers == [] and detached.consumers == []
