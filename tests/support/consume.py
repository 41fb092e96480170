"""Reading a topic back in tests: everything on it, from the earliest message."""

from __future__ import annotations

from minipulsar import Client, InitialPosition, Timeout


async def consume_all(service_url: str, topic: str, expected: int, subscription: str = "check") -> list[bytes]:
    """Every message of ``topic`` from the earliest, in order, on a durable ``subscription``:
    waits up to 10 s for each of the first ``expected``, then 2 s for any more (duplicates or
    messages nobody expected must show up too)."""
    got: list[bytes] = []
    async with Client(service_url) as client:
        consumer = await client.subscribe(topic, subscription, initial_position=InitialPosition.Earliest)
        while True:
            try:
                message = await consumer.receive(timeout_millis=10_000 if len(got) < expected else 2_000)
            except Timeout:  # nothing more to consume
                return got
            got.append(message.data())
