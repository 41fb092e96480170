"""Goal: the broker-wide publish buffer pauses every producer connection at its limit and
resumes them all at half of it (Pulsar PR 6178/6550), and composes with each connection's own
pending-sends limit: a connection reads only when no reason holds it."""

from __future__ import annotations

from minipulsar.broker.publish_buffer import GLOBAL_LIMIT, PublishBuffer
from tests.support.broker_fakes import FakeConnection


def test_reaching_the_limit_pauses_every_connection_and_half_resumes_them() -> None:
    buffer = PublishBuffer(1000)
    connections = [FakeConnection() for _ in range(3)]
    for connection in connections:
        buffer.register(connection)
    buffer.add(600)
    assert all(c.reading for c in connections)
    buffer.add(400)
    assert buffer.paused and buffer.pauses == 1
    assert not any(c.reading for c in connections)
    assert buffer.throttled_connections == 3
    buffer.release(400)  # 600 left: above half
    assert not any(c.reading for c in connections)
    buffer.release(100)  # 500: half
    assert all(c.reading for c in connections)
    assert buffer.throttled_connections == 0
    assert buffer.max_usage_bytes == 1000


def test_a_connection_registered_while_paused_is_paused_at_once() -> None:
    buffer = PublishBuffer(100)
    buffer.add(150)
    late = FakeConnection()
    buffer.register(late)
    assert late.reasons == {GLOBAL_LIMIT}
    buffer.unregister(late)
    assert late.reading, "a connection that leaves the buffer is not left paused by it"


def test_the_per_connection_reason_keeps_a_connection_paused_after_the_global_resume() -> None:
    buffer = PublishBuffer(100)
    connection = FakeConnection()
    buffer.register(connection)
    connection.throttle("maxPendingPublishRequestsPerConnection")
    buffer.add(100)
    buffer.release(100)
    assert connection.reasons == {"maxPendingPublishRequestsPerConnection"}
    connection.unthrottle("maxPendingPublishRequestsPerConnection")
    assert connection.reading


def test_minus_one_turns_the_limit_off_but_still_counts() -> None:
    buffer = PublishBuffer.from_megabytes(-1)
    connection = FakeConnection()
    buffer.register(connection)
    buffer.add(10**9)
    assert connection.reading and not buffer.paused
    assert buffer.size_bytes == 10**9
