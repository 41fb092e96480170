"""The names a program ported from the official client looks up exist: on ``minipulsar``
(the asyncio API), on ``minipulsar.sync`` (the blocking one), and the enums' members."""

from __future__ import annotations

import inspect

import pytest

import minipulsar
import minipulsar.sync
from minipulsar import client

OFFICIAL_NAMES = [
    "Client",
    "MessageId",
    "Message",
    "ConsumerType",
    "InitialPosition",
    "PartitionsRoutingMode",
    "CompressionType",
    "BatchingType",
    "ConsumerBatchReceivePolicy",
    "PulsarException",
    "Timeout",
    "LookupError",
    "ConnectError",
    "ProducerQueueIsFull",
    "TopicNotFound",
    "ConsumerBusy",
    "ProducerBusy",
    "AlreadyClosed",
    "NotConnected",
    "ServiceUnitNotReady",
    "MemoryBufferIsFull",
    "TooManyLookupRequestException",
]


def test_the_package_root_offers_every_client_name() -> None:
    assert set(minipulsar.__all__) == set(client.__all__)
    for name in client.__all__:
        assert getattr(minipulsar, name) is getattr(client, name)


@pytest.mark.parametrize("name", OFFICIAL_NAMES)
def test_official_names_exist_on_both_apis(name: str) -> None:
    assert getattr(minipulsar, name) is not None
    assert getattr(minipulsar.sync, name) is not None


@pytest.mark.parametrize(
    "enum_name, members",
    [
        ("ConsumerType", ["Exclusive", "Shared", "Failover", "KeyShared"]),
        ("InitialPosition", ["Latest", "Earliest"]),
        ("PartitionsRoutingMode", ["UseSinglePartition", "RoundRobinDistribution", "CustomPartition"]),
        ("CompressionType", ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]),
        ("BatchingType", ["Default", "KeyBased"]),
    ],
)
def test_enums_have_the_official_members(enum_name: str, members: list[str]) -> None:
    enum = getattr(minipulsar, enum_name)
    assert all(hasattr(enum, member) for member in members)


@pytest.mark.parametrize(
    "method, arguments",
    [
        (
            "create_producer",
            [
                "topic",
                "producer_name",
                "send_timeout_millis",
                "batching_enabled",
                "batching_max_publish_delay_ms",
                "message_routing_mode",
                "message_router",
                "max_pending_messages_across_partitions",
                "lazy_start_partitioned_producers",
            ],
        ),
        (
            "subscribe",
            [
                "topic",
                "subscription_name",
                "consumer_type",
                "receiver_queue_size",
                "initial_position",
                "max_total_receiver_queue_size_across_partitions",
                "is_pattern_topic",
                "pattern_auto_discovery_period",
            ],
        ),
        (
            "create_reader",
            [
                "topic",
                "start_message_id",
                "receiver_queue_size",
                "reader_name",
                "subscription_role_prefix",
                "start_message_id_inclusive",
            ],
        ),
    ],
)
def test_client_methods_take_the_official_argument_names(method: str, arguments: list[str]) -> None:
    parameters = inspect.signature(getattr(minipulsar.Client, method)).parameters
    assert [a for a in arguments if a not in parameters] == []
