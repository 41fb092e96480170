"""Goal: every builder makes a complete command the decoder reads back as built,
error_response answers each kind of request in the form its client waits for, and every
minipulsar error code has a deliberate Pulsar ServerError.

Method: build, frame, decode; one forged request per kind; the ErrorCode enum walked.
"""

from __future__ import annotations

import pytest

from minipulsar.binary_protocol import commands
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.frames import PulsarFrameDecoder, encode_command
from minipulsar.errors import (
    ErrorCode,
    MalformedCommandError,
    NotOwnerError,
    ServerError,
    TopicNotFoundError,
    error_for_code,
)

T = api.BaseCommand
NO_ERROR = api.UnknownError

BUILT = [
    commands.connected("minipulsar-0.1.0", 20, 5 << 20, feature_flags=api.FeatureFlags(supports_auth_refresh=True)),
    commands.ping(),
    commands.pong(),
    commands.success(1),
    commands.error(2, api.TopicNotFound, "gone"),
    commands.partitioned_metadata_response(3, 0),
    commands.partitioned_metadata_error(4, api.ServiceNotReady, "busy"),
    commands.lookup_response(5, "pulsar://b:6650", redirect=True, authoritative=True, broker_service_url_tls="x"),
    commands.lookup_error(6, api.TopicNotFound, "no"),
    commands.topics_of_namespace_response(7, ["persistent://t/n/a"], filtered=True, topics_hash="h"),
    commands.producer_success(8, "producer-1", 41, schema_version=b"\x00", producer_ready=False),
    commands.send_receipt(1, 2, 3, 4, 5),
    commands.send_error(1, 2, api.ChecksumError, "bad crc"),
    commands.close_producer(1, 9, assigned_broker_service_url="pulsar://c:6650"),
    commands.message(1, 2, 3, 4, 5, ack_set=[7, -1]),
    commands.ack_response(1, 10),
    commands.ack_response(1, 11, api.NotAllowedError, "no"),
    commands.active_consumer_change(1, True),
    commands.reached_end_of_topic(1),
    commands.close_consumer(1, 12),
    commands.last_message_id_response(13, 3, 4, partition=2, batch_index=1, mark_delete_position=(3, -1)),
]


@pytest.mark.parametrize("command", BUILT, ids=lambda c: T.Type.Name(c.type))
def test_built_commands_decode_as_built(command: api.BaseCommand) -> None:
    decoder = PulsarFrameDecoder()
    decoder.feed(encode_command(command))  # raises EncodeError when a required field is unset
    frame = decoder.next_frame()
    assert frame is not None and frame.command == command
    assert commands.body(frame.command) is not None


def test_minus_one_ids_travel_as_uint64() -> None:
    receipt = commands.send_receipt(1, 2, -1, -1).send_receipt.message_id
    assert (receipt.ledgerId, receipt.entryId) == (2**64 - 1, 2**64 - 1)
    assert commands.u64(-1) == 2**64 - 1 and commands.u64(5) == 5


def test_message_leaves_defaults_unset() -> None:
    push = commands.message(1, 2, 3).message
    assert not push.message_id.HasField("partition")
    assert not push.HasField("redelivery_count")


def request(kind: int, **fields: object) -> api.BaseCommand:
    command = api.BaseCommand(type=kind)  # type: ignore[arg-type]
    body = getattr(command, api.BaseCommand.DESCRIPTOR.fields_by_number[kind].name)
    for name, value in fields.items():
        setattr(body, name, value)
    body.SetInParent()
    return command


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        (request(T.LOOKUP, topic="t", request_id=1), T.LOOKUP_RESPONSE),
        (request(T.PARTITIONED_METADATA, topic="t", request_id=1), T.PARTITIONED_METADATA_RESPONSE),
        (request(T.PRODUCER, topic="t", producer_id=3, request_id=1), T.ERROR),
        (request(T.SUBSCRIBE, topic="t", subscription="s", subType=0, consumer_id=3, request_id=1), T.ERROR),
        (request(T.GET_LAST_MESSAGE_ID, consumer_id=3, request_id=1), T.ERROR),
        (request(T.GET_TOPICS_OF_NAMESPACE, namespace="t/n", request_id=1), T.ERROR),
        (request(T.WATCH_TOPIC_LIST, request_id=1, watcher_id=2, namespace="t/n", topics_pattern=".*"), T.ERROR),
        (request(T.GET_SCHEMA, topic="t", request_id=1), T.GET_SCHEMA_RESPONSE),
        (request(T.CONSUMER_STATS, consumer_id=3, request_id=1), T.CONSUMER_STATS_RESPONSE),
        (request(T.NEW_TXN, request_id=1), T.NEW_TXN_RESPONSE),
        (request(T.END_TXN, request_id=1, txnid_least_bits=4, txnid_most_bits=5), T.END_TXN_RESPONSE),
        (request(T.TC_CLIENT_CONNECT_REQUEST, request_id=1, tc_id=0), T.TC_CLIENT_CONNECT_RESPONSE),
        (request(T.ACK, consumer_id=3, ack_type=0, request_id=1), T.ACK_RESPONSE),
    ],
    ids=lambda value: T.Type.Name(value) if isinstance(value, int) else T.Type.Name(value.type),
)
def test_error_response_answers_in_the_form_the_client_waits_for(asked: api.BaseCommand, answered: int) -> None:
    answer = commands.error_response(asked, api.NotAllowedError, "not supported")
    assert answer is not None and answer.type == answered
    assert answer.IsInitialized()
    body = commands.body(answer)
    assert body.request_id == 1
    fields = {field.name: value for field, value in body.ListFields()}
    assert api.NotAllowedError in fields.values() and "not supported" in fields.values()
    if asked.type == T.END_TXN:
        assert (body.txnid_least_bits, body.txnid_most_bits) == (4, 5)


def test_error_response_to_a_send_is_a_send_error() -> None:
    answer = commands.error_response(request(T.SEND, producer_id=3, sequence_id=9), api.PersistenceError, "bk")
    assert answer == commands.send_error(3, 9, api.PersistenceError, "bk")


@pytest.mark.parametrize(
    "asked",
    [
        request(T.FLOW, consumer_id=1, messagePermits=10),
        request(T.ACK, consumer_id=1, ack_type=0),
        request(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1),
        api.BaseCommand(type=T.SCALABLE_TOPIC_LOOKUP),
    ],
    ids=lambda c: T.Type.Name(c.type),
)
def test_what_has_no_request_id_gets_no_answer(asked: api.BaseCommand) -> None:
    assert commands.error_response(asked, api.NotAllowedError, "no") is None


def test_every_error_code_maps_deliberately() -> None:
    """A new ErrorCode must be placed in the table on purpose (UnknownError only for itself)."""
    for code in ErrorCode:
        server_error = commands.server_error_for(code)
        assert server_error != api.UnknownError or code == ErrorCode.UNKNOWN_ERROR, code
    assert commands.server_error_for("NoSuchCode") == api.UnknownError


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("NotOwner", api.ServiceNotReady),
        ("TopicNotFound", api.TopicNotFound),
        ("ProducerBusy", api.ProducerBusy),
        ("ConsumerBusy", api.ConsumerBusy),
        ("PersistenceError", api.PersistenceError),
        ("ServiceNotReady", api.ServiceNotReady),
        ("TooManyRequests", api.TooManyRequests),
        ("InvalidCommand", api.NotAllowedError),
        ("ChecksumError", api.ChecksumError),
        ("NotSupported", api.NotAllowedError),
        ("LedgerFenced", api.ServiceNotReady),
        ("BadVersion", api.MetadataError),
    ],
)
def test_server_error_for(code: str, expected: int) -> None:
    assert commands.server_error_for(code) == expected
    if code in ErrorCode.__members__.values():
        assert commands.server_error_for(ErrorCode(code)) == expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NotOwnerError("moved"), api.ServiceNotReady),
        (TopicNotFoundError("gone"), api.TopicNotFound),
        (MalformedCommandError("garbage"), api.NotAllowedError),
        (RuntimeError("bug"), api.UnknownError),
    ],
)
def test_server_error_of_an_exception(error: BaseException, expected: int) -> None:
    assert commands.server_error_of(error) == expected


def test_server_error_of_every_server_error_class() -> None:
    for code in ErrorCode:
        error: ServerError = error_for_code(code.value, "x")
        assert commands.server_error_of(error) == commands.server_error_for(code)
