"""Raw Pulsar-protocol garbage on the broker's shared client port leaves every other client
served (docs/design.md §3.8): malformed protobuf, unknown command types, a command without its
body, a SEND whose checksum is wrong, a 2 GiB frame, and first bytes of neither protocol.

Method: one cluster (1 bookie, 1 broker); an official client and minipulsar's own keep a
producer and a consumer on one topic while raw sockets send each bad input; each raw socket
asserts the broker's answer (a typed ERROR or SEND_ERROR, or a close for what cannot be
resynchronised), then both clients must still exchange messages.
"""

from __future__ import annotations

import socket
import struct

import pulsar

import minipulsar.sync
from minipulsar.binary_protocol import commands
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.frames import (
    encode_headers_and_payload,
    encode_payload_command,
)
from tests.support.cluster import ProcessCluster
from tests.support.fixtures import cluster_fixture
from tests.support.raw_pulsar import SOCKET_TIMEOUT_S, RawPulsar, raw_pulsar_fixture

cluster = cluster_fixture(per_module=True)
raw = raw_pulsar_fixture()

T = api.BaseCommand
TOPIC = "persistent://public/default/fuzz-served"


def frame_of(body: bytes, command_size: int | None = None) -> bytes:
    """``[totalSize][commandSize][body]`` around any bytes."""
    size = len(body) if command_size is None else command_size
    return struct.pack(">II", len(body) + 4, size) + body


def both_clients_served(cluster: ProcessCluster) -> None:
    """Both clients still publish and consume on the broker."""
    official = pulsar.Client(cluster.service_url, operation_timeout_seconds=15)
    ours = minipulsar.sync.Client(cluster.service_url)
    try:
        consumer = official.subscribe(TOPIC, "official")
        our_consumer = ours.subscribe(TOPIC, "ours")
        official.create_producer(TOPIC).send(b"from-official")
        ours.create_producer(TOPIC).send(b"from-ours")
        assert {consumer.receive(timeout_millis=10_000).data() for _ in range(2)} == {b"from-official", b"from-ours"}
        assert {our_consumer.receive(timeout_millis=10_000).data() for _ in range(2)} == {
            b"from-official",
            b"from-ours",
        }
    finally:
        ours.close()
        official.close()


def test_garbage_protobuf_is_answered_and_the_connection_goes_on(raw: RawPulsar, cluster: ProcessCluster) -> None:
    raw.connect()
    raw.send(frame_of(b"\xff\xff\xff\xff not protobuf"))
    answer = raw.next_frame()
    assert answer is not None and answer.command.type == T.ERROR
    raw.command(T(type=T.PING, ping=api.CommandPing()))
    pong = raw.next_frame()
    assert pong is not None and pong.command.type == T.PONG
    both_clients_served(cluster)


def test_a_command_without_its_body_or_of_an_unknown_type_is_refused_with_its_request_id(
    raw: RawPulsar, cluster: ProcessCluster
) -> None:
    raw.connect()
    raw.command(T(type=T.LOOKUP))  # no lookupTopic body
    answer = raw.next_frame()
    assert answer is not None and answer.command.type in (T.ERROR, T.LOOKUP_RESPONSE)
    schema = T(type=T.GET_SCHEMA, getSchema=api.CommandGetSchema(request_id=77, topic=TOPIC))
    raw.command(schema)
    refused = raw.next_frame()
    assert refused is not None
    assert refused.command.type in (T.ERROR, T.GET_SCHEMA_RESPONSE)
    assert commands.body(refused.command).request_id == 77
    both_clients_served(cluster)


def test_a_send_with_a_wrong_checksum_is_refused_unwritten(raw: RawPulsar, cluster: ProcessCluster) -> None:
    raw.connect()
    producer = T(type=T.PRODUCER, producer=api.CommandProducer(topic=TOPIC, producer_id=1, request_id=1))
    raw.command(producer)
    created = raw.next_frame()
    assert created is not None and created.command.type == T.PRODUCER_SUCCESS
    metadata = api.MessageMetadata(producer_name=created.command.producer_success.producer_name, sequence_id=0)
    metadata.publish_time = 1
    entry = bytearray(encode_headers_and_payload(metadata, b"payload"))
    entry[-1] ^= 0xFF  # the payload changed after the checksum was computed
    send = T(type=T.SEND, send=api.CommandSend(producer_id=1, sequence_id=0, num_messages=1))
    header, body = encode_payload_command(send, bytes(entry))
    raw.send(header + bytes(body))
    answer = raw.next_frame()
    assert answer is not None and answer.command.type == T.SEND_ERROR
    assert answer.command.send_error.error == api.ChecksumError
    both_clients_served(cluster)


def test_a_2_gib_frame_closes_only_its_own_connection(raw: RawPulsar, cluster: ProcessCluster) -> None:
    raw.connect()
    raw.send(struct.pack(">II", 2**31, 10))
    while (frame := raw.next_frame()) is not None:  # an ERROR, perhaps, then the close
        assert frame.command.type == T.ERROR
    both_clients_served(cluster)


def test_first_bytes_of_neither_protocol_are_refused(cluster: ProcessCluster) -> None:
    assert cluster.broker is not None
    host, port = cluster.broker.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert b"InvalidCommand" in received  # our ERROR, in our framing: the peer spoke neither
    both_clients_served(cluster)
