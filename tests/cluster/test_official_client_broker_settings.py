"""Goal: the broker's limits and settings hold for official clients as for ours: with
``acknowledgmentAtBatchIndexLevelEnabled`` a redelivered batch leaves out the messages an
official consumer acknowledged one by one (and the batch is acknowledged whole once all are);
ledger rollover and a bundle unload lose nothing; ``maxPendingPublishRequestsPerConnection``
slows an official producer (the socket stops being read) and loses nothing; a consumer is
sent no more messages than its permits.

Method: one broker and one bookie with those settings (ledgers of 5 entries, 8 pending
publishes a connection); official producers and consumers. Batch-index acks: consumers with
``batch_index_ack_enabled`` (their acks carry Pulsar's ``ack_set``) acknowledge part of one
batch of 10 and close (the client flushes its acks before CLOSE_CONSUMER, on one connection),
and the next consumer of the subscription receives the rest.
"""

from __future__ import annotations

import time

import pulsar
import pytest

from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.official_client import (
    RECEIVE_MS,
    official_topic,
    produce_burst,
    receive_each,
)
from tests.support.web import consumer_stats, http_request, metrics_text, required_sample, topic_stats, web_url

cluster = cluster_fixture(
    per_module=True,
    broker_settings={
        "acknowledgmentAtBatchIndexLevelEnabled": True,
        "managedLedgerMaxEntriesPerLedger": 5,
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        "maxPendingPublishRequestsPerConnection": 8,
    },
)

QUIET_MS = 1_000


def batch_index_consumer(client: pulsar.Client, topic: str) -> pulsar.Consumer:
    return client.subscribe(
        topic, "sub", initial_position=pulsar.InitialPosition.Earliest, batch_index_ack_enabled=True
    )


def received_then_quiet(consumer: pulsar.Consumer, count: int) -> list[pulsar.Message]:
    received = receive_each(consumer, count)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=QUIET_MS)
    return received


def test_a_redelivered_batch_leaves_out_what_was_acknowledged(official: pulsar.Client) -> None:
    topic = official_topic("batch-index-acks")
    payloads = produce_burst(official, topic, 10, batching_enabled=True, batching_max_publish_delay_ms=50)
    first = batch_index_consumer(official, topic)
    received = receive_each(first, 10)
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received}) == 1, "not one batch"
    for message in received[:4] + received[7:]:
        first.acknowledge(message)
    first.close()
    second = batch_index_consumer(official, topic)
    rest = received_then_quiet(second, 3)
    assert [m.data() for m in rest] == payloads[4:7]
    for message in rest:
        second.acknowledge(message)
    second.close()
    third = batch_index_consumer(official, topic)
    with pytest.raises(pulsar.Timeout):  # the batch is acknowledged whole
        third.receive(timeout_millis=QUIET_MS)


def test_ledger_rollover_and_a_bundle_unload_lose_nothing(official: pulsar.Client, cluster: ProcessCluster) -> None:
    topic = official_topic("rollover-unload")
    consumer = official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = official.create_producer(topic, batching_enabled=False)
    sent = [f"m-{i}".encode() for i in range(40)]
    for payload in sent[:20]:
        producer.send(payload)
    assert [m.data() for m in receive_each(consumer, 20)] == sent[:20]
    assert cluster.broker is not None
    status, answer = http_request("PUT", f"{web_url(cluster.broker)}/admin/v2/namespaces/public/default/unload")
    assert status == 204, (status, answer)
    for payload in sent[20:]:  # the client was sent CLOSE_PRODUCER and CLOSE_CONSUMER: it reconnects
        producer.send(payload)
    after: list[bytes] = []  # the first 20 were not acknowledged: they may come again (at least once)
    while not set(sent[20:]) <= set(after) and len(after) < 40:
        after.append(consumer.receive(timeout_millis=RECEIVE_MS).data())
    assert [m for m in after if m in sent[20:]] == sent[20:] and set(after) <= set(sent), after
    ledgers = topic_stats(cluster, topic.rsplit("/", 1)[-1], "internalStats")["ledgers"]
    assert len(ledgers) >= 8, ledgers  # 5 entries a ledger


def test_publish_throttling_slows_an_official_producer_and_loses_nothing(
    official: pulsar.Client, cluster: ProcessCluster
) -> None:
    assert cluster.broker is not None
    pauses_before = required_sample(metrics_text(cluster.broker), "pulsar_broker_connection_pauses_total")
    topic = official_topic("throttled")
    consumer = official.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    payloads = produce_burst(official, topic, 500, batching_enabled=False, max_pending_messages=1000)
    assert [m.data() for m in receive_each(consumer, 500)] == payloads
    pauses = required_sample(metrics_text(cluster.broker), "pulsar_broker_connection_pauses_total")
    assert pauses > pauses_before, "500 sends in flight never reached maxPendingPublishRequestsPerConnection=8"


def test_an_official_consumer_is_sent_no_more_than_its_permits(
    official: pulsar.Client, cluster: ProcessCluster
) -> None:
    """The C++ client grants its receiver queue in FLOW; the broker sends no more until the
    application has taken some."""
    topic = official_topic("permits")
    consumer = official.subscribe(topic, "sub", receiver_queue_size=10)  # before: keeps the ledgers (no retention)
    payloads = produce_burst(official, topic, 100, batching_enabled=False)

    def sent() -> int:
        counter: int = consumer_stats(cluster, topic.rsplit("/", 1)[-1], "sub")[0]["msgOutCounter"]
        return counter

    deadline = time.monotonic() + 10
    while sent() < 10:
        assert time.monotonic() < deadline, "the consumer's first permits were never used"
        time.sleep(0.05)
    quiet_until = time.monotonic() + QUIET_MS / 1000
    while time.monotonic() < quiet_until:  # nothing received: no more permits, no more messages
        assert sent() == 10
        time.sleep(0.05)
    assert [m.data() for m in receive_each(consumer, 100)] == payloads
