"""Goal: :class:`PulsarWire` turns an official client's frames into the commands the broker's
handlers take, and their answers into the frames the client waits for — each request's failure
in its own response type, and commands this build does not serve refused by name with their
request id (docs/design.md §3.8).

Method: feed encoded ``BaseCommand`` frames in, read commands out; encode our commands and
decode the frames with the package's own decoder. No sockets.
"""

from __future__ import annotations

import pytest

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.frames import PulsarFrame, PulsarFrameDecoder, encode_command, encode_payload_command
from minipulsar.binary_protocol.wire import MAX_PROTOCOL_VERSION, PulsarWire
from minipulsar.errors import ErrorCode, MalformedCommandError
from minipulsar.protocol import commands as cmd
from minipulsar.protocol.schema import Command

T = api.BaseCommand


def wire() -> PulsarWire:
    return PulsarWire(max_frame_size=1 << 20, max_message_size=1 << 19, server_version="minipulsar-broker")


def decoded(w: PulsarWire, command: api.BaseCommand, payload: bytes | None = None) -> Command | None:
    if payload is None:
        w.feed(encode_command(command))
    else:
        header, body = encode_payload_command(command, payload)
        w.feed(header + bytes(body))
    return w.next_command()


def answer(w: PulsarWire, command: Command) -> PulsarFrame:
    frame, rest = w.encode(command)
    decoder = PulsarFrameDecoder()
    decoder.feed(frame + rest)
    parsed = decoder.next_frame()
    assert parsed is not None
    return parsed


def test_connect_negotiates_the_lower_protocol_version() -> None:
    w = wire()
    connect = decoded(w, T(type=T.CONNECT, connect=api.CommandConnect(client_version="c", protocol_version=99)))
    assert isinstance(connect, cmd.Connect) and connect.client_version == "c"
    connected = answer(w, cmd.Connected(id=0, protocol_version=1, max_frame_size=1 << 20)).command
    assert connected.type == T.CONNECTED
    assert connected.connected.protocol_version == MAX_PROTOCOL_VERSION
    assert connected.connected.max_message_size == 1 << 19


def test_a_failed_lookup_is_answered_by_a_failed_lookup_response() -> None:
    w = wire()
    lookup = decoded(w, T(type=T.LOOKUP, lookupTopic=api.CommandLookupTopic(topic="t", request_id=5)))
    assert isinstance(lookup, cmd.Lookup) and lookup.id == 5
    failed = answer(w, cmd.Error(code="ServiceNotReady", message="loading", id=5)).command
    assert failed.type == T.LOOKUP_RESPONSE
    assert failed.lookupTopicResponse.response == api.CommandLookupTopicResponse.Failed
    assert failed.lookupTopicResponse.error == api.ServiceNotReady


def test_an_ack_with_a_request_id_is_answered_by_an_ack_response() -> None:
    w = wire()
    ack = api.CommandAck(consumer_id=3, ack_type=api.CommandAck.Individual, request_id=8)
    ack.message_id.add(ledgerId=1, entryId=2)
    decoded_ack = decoded(w, T(type=T.ACK, ack=ack))
    assert decoded_ack == cmd.Ack(consumer_id=3, message_ids=[[1, 2]], ack_type="individual", id=8)
    response = answer(w, cmd.Success(id=8)).command
    assert response.type == T.ACK_RESPONSE
    assert (response.ackResponse.consumer_id, response.ackResponse.request_id) == (3, 8)


def test_a_send_without_highest_sequence_id_covers_its_whole_batch() -> None:
    w = wire()
    send = T(type=T.SEND, send=api.CommandSend(producer_id=1, sequence_id=10, num_messages=5))
    decoded_send = decoded(w, send, payload=b"\x00\x00\x00\x00")
    assert isinstance(decoded_send, cmd.Send)
    assert (decoded_send.sequence_id, decoded_send.highest_sequence_id, decoded_send.num_messages) == (10, 14, 5)
    assert decoded_send.payload == b"\x00\x00\x00\x00"


def test_subscribe_maps_type_position_durability_and_start() -> None:
    w = wire()
    subscribe = api.CommandSubscribe(
        topic="t",
        subscription="s",
        subType=api.CommandSubscribe.Key_Shared,
        consumer_id=4,
        request_id=9,
        durable=False,
        initialPosition=api.CommandSubscribe.Earliest,
    )
    subscribe.start_message_id.ledgerId = 7
    subscribe.start_message_id.entryId = 3
    decoded_subscribe = decoded(w, T(type=T.SUBSCRIBE, subscribe=subscribe))
    assert isinstance(decoded_subscribe, cmd.Subscribe)
    assert decoded_subscribe.sub_type == "Key_Shared"
    assert decoded_subscribe.initial_position == "Earliest"
    assert decoded_subscribe.durable is False
    assert decoded_subscribe.start_message_id == [7, 3]


def test_a_schema_request_is_refused_as_not_supported_in_its_own_response_type() -> None:
    w = wire()
    with pytest.raises(MalformedCommandError) as refused:
        decoded(w, T(type=T.GET_SCHEMA, getSchema=api.CommandGetSchema(request_id=11, topic="t")))
    assert refused.value.request_id == 11
    assert refused.value.code == ErrorCode.NOT_SUPPORTED
    response = answer(w, cmd.Error(code=refused.value.code.value, message=str(refused.value), id=11)).command
    assert response.type == T.GET_SCHEMA_RESPONSE
    assert response.getSchemaResponse.request_id == 11
    assert "schemas" in response.getSchemaResponse.error_message


@pytest.mark.parametrize("mode", ["Shared", "Exclusive", "ExclusiveWithFencing", "WaitForExclusive"])
def test_a_producers_access_mode_passes(mode: str) -> None:
    access_mode = api.ProducerAccessMode.Value(mode)
    request = api.CommandProducer(topic="t", producer_id=1, request_id=2, producer_access_mode=access_mode)
    producer = decoded(wire(), T(type=T.PRODUCER, producer=request))
    assert isinstance(producer, cmd.Producer) and producer.access_mode == mode


def test_a_queued_producer_is_told_it_is_not_ready_then_that_it_is() -> None:
    w = wire()
    waiting = answer(w, cmd.ProducerSuccess(id=3, producer_name="p", producer_ready=False)).command.producer_success
    ready = answer(w, cmd.ProducerSuccess(id=3, producer_name="p")).command.producer_success
    assert (waiting.request_id, waiting.HasField("producer_ready"), waiting.producer_ready) == (3, True, False)
    assert (ready.request_id, ready.producer_ready) == (3, True)


def test_a_command_without_its_body_is_malformed_and_the_wire_goes_on() -> None:
    w = wire()
    with pytest.raises(MalformedCommandError):
        decoded(w, T(type=T.FLOW))
    assert isinstance(decoded(w, T(type=T.PING, ping=api.CommandPing())), cmd.Ping)


def test_a_message_push_carries_the_entry_unchanged_behind_its_command() -> None:
    w = wire()
    header, body = w.encode_message(2, 7, 9, b"stored entry", redelivery_count=3)
    decoder = PulsarFrameDecoder()
    decoder.feed(header + bytes(body))
    frame = decoder.next_frame()
    assert frame is not None
    assert frame.command.message.message_id.ledgerId == 7
    assert frame.command.message.message_id.entryId == 9
    assert frame.command.message.redelivery_count == 3
    assert frame.headers_and_payload == b"stored entry"


def test_the_brokers_own_close_producer_gets_a_request_id() -> None:
    w = wire()
    close = answer(w, cmd.CloseProducer(producer_id=4, assigned_broker_url="pulsar://b:6650")).command
    assert close.type == T.CLOSE_PRODUCER
    assert close.close_producer.producer_id == 4
    assert close.close_producer.assignedBrokerServiceUrl == "pulsar://b:6650"
    assert close.close_producer.HasField("request_id")


def test_an_empty_topics_last_message_id_is_minus_one_as_pulsar_writes_it() -> None:
    response = answer(wire(), cmd.LastMessageId(id=1, ledger_id=-1, entry_id=-1)).command
    assert response.getLastMessageIdResponse.last_message_id.entryId == 2**64 - 1


def test_a_batch_index_ack_travels_with_its_ack_set_beside_whole_acks() -> None:
    part = api.MessageIdData(ledgerId=3, entryId=7, ack_set=[0b1110])
    whole = api.MessageIdData(ledgerId=3, entryId=8)
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Individual, message_id=[part, whole])
    command = decoded(wire(), T(type=T.ACK, ack=ack))
    assert isinstance(command, cmd.Ack)
    assert (command.message_ids, command.batch_index_acks) == ([[3, 8]], [[3, 7, [0b1110]]])


def test_a_message_push_names_what_is_left_of_a_partly_acknowledged_batch() -> None:
    header, body = wire().encode_message(2, 7, 9, b"stored entry", ack_set=[-(1 << 63), 1])
    decoder = PulsarFrameDecoder()
    decoder.feed(header + bytes(body))
    frame = decoder.next_frame()
    assert frame is not None and list(frame.command.message.ack_set) == [-(1 << 63), 1]
