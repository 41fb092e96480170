"""Goal: an unloaded topic's clients are handled in the order that keeps acknowledged messages
(reference §2.4): producers and consumers are detached first, the topic closes only once the
sends already persisting have completed (their receipts go out before any CLOSE), and the
CLOSE_PRODUCER / CLOSE_CONSUMER come last, naming the new owner when there is one.

Method: broker/namespace/unload.py on fake topics and connections that record every call."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from minipulsar.broker.namespace.unload import close_topics


class FakeConnection:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.producers: set[int] = set()
        self.consumers: set[int] = set()

    def detach_producer(self, producer_id: int) -> bool:
        self.log.append(f"detach producer {producer_id}")
        return producer_id in self.producers

    def detach_consumer(self, consumer_id: int) -> bool:
        self.log.append(f"detach consumer {consumer_id}")
        return consumer_id in self.consumers

    def send_close_producer(self, producer_id: int, assigned: str | None) -> None:
        self.log.append(f"CLOSE_PRODUCER {producer_id} {assigned}")

    def send_close_consumer(self, consumer_id: int, assigned: str | None) -> None:
        self.log.append(f"CLOSE_CONSUMER {consumer_id} {assigned}")


class FakeTopic:
    def __init__(self, log: list[str], connection: FakeConnection, in_flight: asyncio.Future) -> None:
        self.name, self.log = "persistent://t/ns/x", log
        connection.producers.add(1)
        connection.consumers.add(7)
        producer = SimpleNamespace(producer_id=1, connection=connection, last_added=in_flight)
        self.counters = SimpleNamespace(producers={(1, 1): producer})
        consumer = SimpleNamespace(consumer_id=7, connection=connection)
        self.subscriptions = {"sub": SimpleNamespace(consumers=[consumer])}

    async def close(self) -> None:
        self.log.append("topic closed")


async def test_the_topic_closes_after_the_persisting_sends_and_clients_hear_last() -> None:
    log: list[str] = []
    connection = FakeConnection(log)
    in_flight = asyncio.get_running_loop().create_future()
    loaded = asyncio.get_running_loop().create_future()
    loaded.set_result(FakeTopic(log, connection, in_flight))
    in_flight.add_done_callback(lambda _: log.append("receipt sent"))
    detach = connection.detach_producer

    def detach_then_complete_later(producer_id: int) -> bool:  # the bookies answer a moment after the detach
        asyncio.get_running_loop().call_later(0.05, in_flight.set_result, "position")
        return detach(producer_id)

    connection.detach_producer = detach_then_complete_later  # type: ignore[method-assign]
    detached = await close_topics([loaded], drain_timeout_s=10)
    assert log == ["detach producer 1", "detach consumer 7", "receipt sent", "topic closed"]
    detached.notify("pulsar://new-owner:6650")
    assert log[-2:] == ["CLOSE_PRODUCER 1 pulsar://new-owner:6650", "CLOSE_CONSUMER 7 pulsar://new-owner:6650"]


async def test_a_send_that_never_completes_delays_the_close_only_until_the_drain_timeout() -> None:
    log: list[str] = []
    connection = FakeConnection(log)
    stuck = asyncio.get_running_loop().create_future()
    loaded = asyncio.get_running_loop().create_future()
    loaded.set_result(FakeTopic(log, connection, stuck))
    detached = await close_topics([loaded], drain_timeout_s=0.05)
    assert log[-1] == "topic closed" and len(detached.producers) == 1


async def test_a_topic_that_failed_to_load_is_skipped() -> None:
    failed = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("could not open the managed ledger"))
    detached = await close_topics([failed], drain_timeout_s=1)
    assert detached.producers == [] and detached.consumers == []
