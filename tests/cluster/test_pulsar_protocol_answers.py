"""Goal: the broker's answers to Pulsar's protocol carry the fields Pulsar's broker fills,
where the official clients' behaviour depends on them only in cases a test of the client
cannot provoke reliably.

Method: one broker and one bookie; the official client writes a batch, a raw Pulsar socket
(tests/support/raw_pulsar.py) subscribes and asks GET_LAST_MESSAGE_ID.
"""

from __future__ import annotations

import pulsar

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.official_client import official_topic, produce_burst
from tests.support.raw_pulsar import RawPulsar, raw_pulsar_fixture

cluster = cluster_fixture(per_module=True)
raw = raw_pulsar_fixture(connected=True)

T = api.BaseCommand
U64 = 1 << 64


def signed(value: int) -> int:
    return value - U64 if value >= 1 << 63 else value


def test_the_last_message_id_names_its_batch_index_and_the_mark_delete_position(
    raw: RawPulsar, cluster: ProcessCluster
) -> None:
    topic = official_topic("answers-last-id")
    official = pulsar.Client(cluster.service_url, operation_timeout_seconds=15)
    try:
        produce_burst(official, topic, 10, batching_enabled=True, batching_max_publish_delay_ms=50)
    finally:
        official.close()
    subscribe = api.CommandSubscribe(
        topic=topic,
        subscription="sub",
        subType=api.CommandSubscribe.Exclusive,
        consumer_id=1,
        request_id=1,
        initialPosition=api.CommandSubscribe.Earliest,
    )
    raw.command(T(type=T.SUBSCRIBE, subscribe=subscribe))
    subscribed = raw.next_frame()
    assert subscribed is not None and subscribed.command.type == T.SUCCESS, subscribed
    ask = api.CommandGetLastMessageId(consumer_id=1, request_id=2)
    raw.command(T(type=T.GET_LAST_MESSAGE_ID, getLastMessageId=ask))
    frame = raw.next_frame()
    assert frame is not None and frame.command.type == T.GET_LAST_MESSAGE_ID_RESPONSE, frame
    answer = frame.command.getLastMessageIdResponse
    last, mark_delete = answer.last_message_id, answer.consumer_mark_delete_position
    assert (signed(last.entryId), last.batch_index) == (0, 9)
    assert answer.HasField("consumer_mark_delete_position")
    assert (mark_delete.ledgerId, signed(mark_delete.entryId)) == (last.ledgerId, -1)  # nothing acked yet
