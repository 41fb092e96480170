"""Goal: latency on every metadata call (ZooKeeper far away, or slow) costs time, never data:
at 0, 50 and 500 ms one-way delay between the servers and the metastore, lookups of new topics
(bundle ownership), producer and consumer creation and ledger creation (a roll every
:data:`ENTRIES_PER_LEDGER` entries) all complete; nothing acknowledged is lost or reordered;
every error a client sees is a typed, retriable one. (A redelivery — at-least-once, after a
reconnection — is allowed and printed.)

Method: 2 bookies and 2 brokers whose metastore links go through one
:class:`~tests.support.delay_proxy.DelayProxy`, set to the delay once the cluster is up. Per
delay, a fresh namespace (its bundles unowned): HTTP lookups of new topics, then a consumer
and an unbatched producer on a new topic, :data:`MESSAGES` sends with receipts, at most
:data:`IN_FLIGHT` at a time, while the consumer receives and acks. Printed, not asserted
(timing): each lookup's time, the creation times, the sends' p50/p99 and the brokers' mean
metadata call latency (``pulsar_metadata_store_ops_latency_ms``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from minipulsar import Client, InitialPosition
from minipulsar.errors import MiniPulsarError
from tests.support.delay_proxy import delayed_metadata_cluster
from tests.support.web import http_get, http_request, metrics_text, sample_value, web_url

ENTRIES_PER_LEDGER = 20
MESSAGES = 60
IN_FLIGHT = 10
LOOKUPS = 2
RECEIVE_TIMEOUT_MS = 30_000

SESSION_TIMEOUT_MS = 10_000
"""Metadata sessions: a timeout must exceed three round trips (here 3 s at 500 ms one-way),
as ZooKeeper's client pings after a third of it idle and drops its connection after two
thirds; the test clusters' usual 2 s is shorter than that (Pulsar's default: 30 s)."""
BROKER_SETTINGS = {
    "managedLedgerMaxEntriesPerLedger": ENTRIES_PER_LEDGER,
    "managedLedgerMinLedgerRolloverTimeMinutes": 0,
    "metadataStoreSessionTimeoutMillis": SESSION_TIMEOUT_MS,
}
BOOKIE_SETTINGS = {"zkTimeout": SESSION_TIMEOUT_MS}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def timed(call) -> tuple[object, float]:
    """(result, or the MiniPulsarError raised; seconds it took)."""
    started = time.monotonic()
    try:
        result = await call
    except MiniPulsarError as error:
        result = error
    return result, time.monotonic() - started


def typed_retriable(errors: list[BaseException]) -> list[BaseException]:
    """The errors that are not a typed, retriable one (a test failure if any)."""
    return [e for e in errors if not (isinstance(e, MiniPulsarError) and e.retriable)]


def total(texts: list[str], name: str, labels: dict[str, str] | None = None) -> float:
    """The sum over processes' /metrics ``texts`` of sample ``name`` with ``labels``."""
    return sum(sample_value(text, name, labels) or 0.0 for text in texts)


def metadata_calls(before: list[str], after: list[str]) -> float:
    """Metadata calls of every type and status the processes made between two scrapes."""
    calls = 0.0
    for op in ("get", "put", "del", "children", "exists"):
        for status in ("success", "fail"):
            labels = {"name": "metadata-store", "type": op, "status": status}
            name = "pulsar_metadata_store_ops_latency_ms_count"
            calls += total(after, name, labels) - total(before, name, labels)
    return calls


def mean_metadata_ms(before: list[str], after: list[str], op: str) -> float:
    """Mean latency of the processes' successful metadata calls of type ``op`` between two scrapes."""
    labels = {"name": "metadata-store", "type": op, "status": "success"}
    name = "pulsar_metadata_store_ops_latency_ms"
    count = total(after, f"{name}_count", labels) - total(before, f"{name}_count", labels)
    spent = total(after, f"{name}_sum", labels) - total(before, f"{name}_sum", labels)
    return spent / count if count else 0.0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("delay_ms", [0, 50, 500])
async def test_metadata_latency_costs_time_not_data(tmp_path: Path, delay_ms: int) -> None:
    async with delayed_metadata_cluster(
        tmp_path, bookies=2, brokers=2, broker_settings=BROKER_SETTINGS, bookie_settings=BOOKIE_SETTINGS
    ) as cluster:
        assert cluster.metadata_proxy is not None and cluster.broker is not None
        before = [await asyncio.to_thread(metrics_text, broker) for broker in cluster.brokers]
        cluster.metadata_proxy.set_delay(delay_ms / 1000)
        web = web_url(cluster.broker)
        namespace = f"public/latency-{delay_ms}"
        status, _ = await asyncio.to_thread(http_request, "PUT", f"{web}/admin/v2/namespaces/{namespace}")
        assert status == 204

        lookup_s = []
        for i in range(LOOKUPS):
            started = time.monotonic()
            await asyncio.to_thread(http_get, f"{web}/lookup/v2/topic/persistent/{namespace}/new-{i}", 60)
            lookup_s.append(time.monotonic() - started)
        after_lookups = [await asyncio.to_thread(metrics_text, broker) for broker in cluster.brokers]

        topic = f"persistent://{namespace}/flow"
        errors: list[BaseException] = []
        async with Client(cluster.service_url, operation_timeout_seconds=60) as client:
            consumer, consumer_s = await timed(
                client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest, receiver_queue_size=50)
            )
            producer, producer_s = await timed(client.create_producer(topic, batching_enabled=False))
            assert not isinstance(consumer, BaseException) and not isinstance(producer, BaseException), (
                consumer,
                producer,
            )

            window = asyncio.Semaphore(IN_FLIGHT)
            acked: list[int] = []
            send_s: list[float] = []

            async def send(seq: int) -> None:
                async with window:
                    result, took_s = await timed(producer.send(b"%d" % seq))
                if isinstance(result, BaseException):
                    errors.append(result)
                else:
                    acked.append(seq)
                    send_s.append(took_s)

            received: list[int] = []

            acks: list[asyncio.Future[None]] = []

            async def consume() -> None:
                while len(received) < MESSAGES:
                    message = await consumer.receive(RECEIVE_TIMEOUT_MS)
                    received.append(int(message.data()))
                    # not awaited one by one: each ack's receipt waits for a metadata write
                    acks.append(asyncio.ensure_future(consumer.acknowledge(message)))

            consuming = asyncio.ensure_future(consume())
            await asyncio.gather(*(send(seq) for seq in range(MESSAGES)))
            if errors:  # a failed send may or may not be stored: wait for the acked ones only
                consuming.cancel()
                wanted = set(acked)
                while not wanted <= set(received):
                    message = await consumer.receive(RECEIVE_TIMEOUT_MS)
                    received.append(int(message.data()))
                    acks.append(asyncio.ensure_future(consumer.acknowledge(message)))
            else:
                await consuming
            for result in await asyncio.gather(*acks, return_exceptions=True):
                if isinstance(result, BaseException):
                    errors.append(result)

        broker_texts = [await asyncio.to_thread(metrics_text, broker) for broker in cluster.brokers]
        cluster.metadata_proxy.set_delay(0)  # the shutdown is not what is measured

    print(
        f"\nmetadata delay {delay_ms} ms one-way: lookups of new topics "
        f"{', '.join(f'{s * 1000:.0f}' for s in lookup_s)} ms "
        f"({metadata_calls(before, after_lookups) / LOOKUPS:.1f} metadata calls per lookup, background ones included); "
        f"consumer created in {consumer_s * 1000:.0f} ms, "
        f"producer in {producer_s * 1000:.0f} ms; {len(acked)}/{MESSAGES} sends acked, "
        f"p50 {percentile(send_s, 0.5) * 1000:.1f} ms, p99 {percentile(send_s, 0.99) * 1000:.1f} ms; "
        f"{total(broker_texts, 'pulsar_ml_ledgers_rolled'):.0f} ledgers rolled; brokers' mean metadata get "
        f"{mean_metadata_ms(before, broker_texts, 'get'):.1f} ms, "
        f"put {mean_metadata_ms(before, broker_texts, 'put'):.1f} ms; "
        f"{len(received) - len(set(received))} redeliveries; "
        f"client errors: {sorted({type(e).__name__ for e in errors})}"
    )
    assert typed_retriable(errors) == [], errors
    assert acked, "no send was acknowledged"
    first_seen = list(dict.fromkeys(seq for seq in received if seq in set(acked)))
    assert sorted(first_seen) == sorted(acked), "an acknowledged message was lost"
    assert first_seen == sorted(first_seen), "acknowledged messages arrived out of order"
