"""Send timeouts on a real cluster: with every bookie paused, sends fail
with a timeout after ``send_timeout_millis`` — exactly the messages whose time is up — and once
the bookies resume the same producer sends again."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from minipulsar import Client, InitialPosition, Timeout
from minipulsar.errors import MiniPulsarError
from tests.support.cluster import make_cluster

SEND_TIMEOUT_MS = 800
LATER_MS = 400
"""The second group is sent this much after the first: still pending when the first fails."""


async def timed_send(producer, data: bytes) -> tuple[object, float]:
    """(message id or the exception, seconds until the send completed)."""
    started = time.monotonic()
    try:
        result = await producer.send(data)
    except MiniPulsarError as error:
        result = error
    return result, time.monotonic() - started


async def test_sends_time_out_while_every_bookie_is_paused_and_succeed_after(tmp_path: Path) -> None:
    """Goal: a message without a receipt fails with Timeout after send_timeout_millis, and
    only such messages: one sent later is still pending then and succeeds once the bookies
    come back; the producer keeps working.
    Method: the only bookie is SIGSTOPped; 5 messages are sent (one batch), 5 more 400 ms
    later; the first 5 fail with Timeout between 0.8 s and 1.3 s; the bookie is resumed at
    once; the later 5 succeed; a new send succeeds; a consumer finds the 5 later ones and the
    new one (the first 5 may be stored too: their adds were only waiting)."""
    async with make_cluster(tmp_path) as cluster:
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer("timeouts", send_timeout_millis=SEND_TIMEOUT_MS)
            consumer = await client.subscribe("timeouts", "sub", initial_position=InitialPosition.Earliest)
            await producer.send(b"warm-up")  # the ledger exists before the bookie stops
            bookie = cluster.bookies[0]
            bookie.pause()
            try:
                first = [asyncio.ensure_future(timed_send(producer, b"first-%d" % i)) for i in range(5)]
                await asyncio.wait(first, timeout=LATER_MS / 1000)
                later = [asyncio.ensure_future(timed_send(producer, b"later-%d" % i)) for i in range(5)]
                outcomes = await asyncio.gather(*first)
                assert not any(t.done() for t in later), "a later message failed with the early ones"
            finally:
                bookie.resume()
            for result, elapsed_s in outcomes:
                assert isinstance(result, Timeout), result
                assert SEND_TIMEOUT_MS / 1000 <= elapsed_s < SEND_TIMEOUT_MS / 1000 + 0.5
            assert "no receipt within 800 ms" in str(outcomes[0][0])

            for result, _ in await asyncio.gather(*later):
                assert not isinstance(result, Exception), result
            assert (await producer.send(b"after")).entry_id() >= 0

            seen = []
            while not seen or seen[-1] != b"after":
                seen.append((await consumer.receive(timeout_millis=10_000)).data())
            assert seen[0] == b"warm-up"
            assert [d for d in seen if not d.startswith(b"first-")][1:] == [b"later-%d" % i for i in range(5)] + [
                b"after"
            ]
