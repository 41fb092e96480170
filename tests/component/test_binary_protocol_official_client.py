"""Goal: minipulsar's codec of Pulsar's binary protocol reads and writes the bytes the
official client (``pulsar-client``, the C++ client 4.2 inside) really sends and accepts.

Method: :class:`ScriptedPulsarBroker`, a throwaway server on 127.0.0.1 (a free port, plain
sockets, threads) built only from :mod:`minipulsar.binary_protocol` — decoder, builders — and
serving just enough of the protocol: CONNECT, lookups, producers (each SEND recorded and
receipted), one consumer (fed given entries on its first FLOW). The official client connects
in the test's thread. Every wait is bounded: the client's operation and connection timeouts,
``receive``'s timeout, a socket timeout in each server thread, and the test's own.

``python -m tests.component.test_binary_protocol_official_client`` prints the client's CONNECT
and SEND frames as Python literals: tests/unit/test_binary_protocol_official_bytes.py keeps
them, so the unit suite checks the decoder on real bytes without a network.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

import pulsar
import pytest

from minipulsar.binary_protocol import commands
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.batch import split_batch
from minipulsar.binary_protocol.convert import batch_from_pulsar_entry, pulsar_entry_from_batch
from minipulsar.binary_protocol.entry import parse_entry
from minipulsar.binary_protocol.frames import PulsarFrame, PulsarFrameDecoder, encode_command, encode_payload_command
from minipulsar.errors import ProtocolError
from minipulsar.protocol.batch import BatchMessage, decode_batch, encode_batch

pytestmark = pytest.mark.timeout(60)

T = api.BaseCommand
TOPIC = "persistent://public/default/official-client"
LEDGER_ID = 7
CODECS = {
    "NONE": pulsar.CompressionType.NONE,
    "LZ4": pulsar.CompressionType.LZ4,
    "ZLIB": pulsar.CompressionType.ZLib,
    "ZSTD": pulsar.CompressionType.ZSTD,
    "SNAPPY": pulsar.CompressionType.SNAPPY,
}


class ScriptedPulsarBroker:
    """Serves official clients from threads until the ``with`` block ends; records every
    frame received (its raw bytes and its decoding) and any error of its threads."""

    def __init__(self, deliveries: list[bytes] | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"pulsar://127.0.0.1:{self._listener.getsockname()[1]}"
        self.frames: list[tuple[bytes, PulsarFrame]] = []
        self.errors: list[BaseException] = []
        self._deliveries = list(deliveries or [])
        self._entry_ids = itertools.count()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> ScriptedPulsarBroker:
        self._start(self._accept)
        return self

    def __exit__(self, *exc_info: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def received(self, kind: int) -> list[PulsarFrame]:
        return [frame for _, frame in self.frames if frame.command.type == kind]

    def _start(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(0.1)
            self._start(self._serve, connection)

    def _serve(self, connection: socket.socket) -> None:
        decoder, raw = PulsarFrameDecoder(), bytearray()
        with connection:
            while not self._stopping.is_set():
                try:
                    data = connection.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return  # the client went away
                if not data:
                    return
                decoder.feed(data)
                raw += data
                try:
                    while (frame := decoder.next_frame()) is not None:
                        size = 4 + int.from_bytes(raw[:4], "big")
                        self.frames.append((bytes(raw[:size]), frame))
                        del raw[:size]
                        for answer in self._answers(frame.command):
                            connection.sendall(answer)
                except (ProtocolError, OSError) as exc:  # recorded for the test to fail on; others raise
                    self.errors.append(exc)
                    return
                decoder.compact()

    def _answers(self, command: api.BaseCommand) -> Iterator[bytes]:
        kind = command.type
        if kind == T.CONNECT:
            yield encode_command(commands.connected("scripted", command.connect.protocol_version, 5 << 20))
        elif kind == T.PARTITIONED_METADATA:
            yield encode_command(commands.partitioned_metadata_response(command.partitionMetadata.request_id, 0))
        elif kind == T.LOOKUP:
            yield encode_command(commands.lookup_response(command.lookupTopic.request_id, self.url))
        elif kind == T.PRODUCER:
            name = command.producer.producer_name or "scripted-producer"
            yield encode_command(commands.producer_success(command.producer.request_id, name))
        elif kind == T.SEND:
            send = command.send
            receipt = commands.send_receipt(send.producer_id, send.sequence_id, LEDGER_ID, next(self._entry_ids))
            yield encode_command(receipt)
        elif kind == T.FLOW:
            while self._deliveries:
                push = commands.message(command.flow.consumer_id, LEDGER_ID, next(self._entry_ids))
                header, entry = encode_payload_command(push, self._deliveries.pop(0))
                yield header + entry
        elif kind == T.PING:
            yield encode_command(commands.pong())
        elif kind in (T.SUBSCRIBE, T.CLOSE_PRODUCER, T.CLOSE_CONSUMER, T.UNSUBSCRIBE):
            yield encode_command(commands.success(commands.body(command).request_id))
        elif kind != T.ACK and (refusal := commands.error_response(command, api.NotAllowedError, "scripted")):
            yield encode_command(refusal)


def official_client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=5,
        connection_timeout_ms=2000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def publish_batch(url: str, codec: str) -> None:
    """Three messages in one batch (flushed by hand: the batch delay is longer than the test)."""
    client = official_client(url)
    try:
        producer = client.create_producer(
            TOPIC, compression_type=CODECS[codec], batching_enabled=True, batching_max_publish_delay_ms=60_000
        )
        for index in range(3):
            producer.send_async(
                b"payload %d " % index * 8,
                None,
                properties={"index": str(index)},
                partition_key=f"key-{index}",
                ordering_key=f"order-{index}",
                event_timestamp=1_000 + index,
                sequence_id=100 + index,
            )
        producer.flush()
        producer.close()
    finally:
        client.close()


def test_the_connect_frame_decodes() -> None:
    with ScriptedPulsarBroker() as broker:
        publish_batch(broker.url, "NONE")
    assert not broker.errors
    (connect,) = broker.received(T.CONNECT)
    assert connect.command.connect.client_version.startswith("Pulsar-CPP-v")
    assert connect.command.connect.protocol_version >= api.v20
    assert connect.headers_and_payload is None
    assert broker.received(T.LOOKUP) and broker.received(T.PRODUCER)


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_from_the_official_producer_reads_in_both_formats(codec: str) -> None:
    """Checksum, codec and every message field survive: split as Pulsar's batch, and
    converted to ours."""
    with ScriptedPulsarBroker() as broker:
        publish_batch(broker.url, codec)
    assert not broker.errors
    (send,) = broker.received(T.SEND)
    assert send.command.send.num_messages == 3
    assert send.headers_and_payload is not None
    entry = parse_entry(send.headers_and_payload)
    assert entry.checksum_ok is True
    assert api.CompressionType.Name(entry.metadata.compression) == codec
    singles = split_batch(entry.metadata, entry.payload)
    assert [m.payload for m in singles] == [b"payload %d " % i * 8 for i in range(3)]
    assert [m.metadata.sequence_id for m in singles] == [100, 101, 102]
    batch = decode_batch(batch_from_pulsar_entry(send.headers_and_payload))
    assert batch.producer_name == entry.metadata.producer_name
    assert batch.publish_time_ms == entry.metadata.publish_time
    assert batch.messages == [
        BatchMessage(100 + i, b"payload %d " % i * 8, f"key-{i}", {"index": str(i)}, 1_000 + i, f"order-{i}")
        for i in range(3)
    ]


def test_a_lone_message_from_the_official_producer_reads_in_both_formats() -> None:
    with ScriptedPulsarBroker() as broker:
        client = official_client(broker.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False)
            producer.send(b"alone", properties={"a": "b"}, partition_key="K", event_timestamp=5, sequence_id=9)
            producer.close()
        finally:
            client.close()
    assert not broker.errors
    (send,) = broker.received(T.SEND)
    assert send.headers_and_payload is not None
    assert not parse_entry(send.headers_and_payload).metadata.HasField("num_messages_in_batch")
    batch = decode_batch(batch_from_pulsar_entry(send.headers_and_payload))
    assert batch.messages == [BatchMessage(9, b"alone", "K", {"a": "b"}, 5)]


OUR_MESSAGES = [
    BatchMessage(10, b"one", "k1", {"p": "1"}, 1234, "ordering-1"),
    BatchMessage(11, None),
    BatchMessage(12, b"three", "k3", None, 0, "\u00e9t\u00e9"),
]


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD"])
def test_the_official_consumer_reads_our_batches_converted(codec: str) -> None:
    """Our batch → ``pulsar_entry_from_batch`` → MESSAGE: the official consumer sees each
    message with its key, ordering key, properties, event time and null value."""
    our_entry = encode_batch(5000, "our-producer", OUR_MESSAGES, codec)
    with ScriptedPulsarBroker([pulsar_entry_from_batch(our_entry)]) as broker:
        client = official_client(broker.url)
        try:
            consumer = client.subscribe(TOPIC, "subscription")
            received = [consumer.receive(timeout_millis=5000) for _ in OUR_MESSAGES]
            consumer.close()
        finally:
            client.close()
    assert not broker.errors
    assert [m.data() for m in received] == [b"one", b"", b"three"]
    assert [m.has_null_value() for m in received] == [False, True, False]
    assert [m.partition_key() for m in received] == ["k1", "", "k3"]
    assert [m.ordering_key() for m in received] == ["ordering-1", "", "\u00e9t\u00e9"]
    assert [m.properties() for m in received] == [{"p": "1"}, {}, {}]
    assert [m.event_timestamp() for m in received] == [1234, 0, 0]
    assert {(m.publish_timestamp(), m.producer_name()) for m in received} == {(5000, "our-producer")}
    assert [m.message_id().batch_index() for m in received] == [0, 1, 2]


def test_the_official_consumer_reads_a_batch_of_one_as_a_message() -> None:
    """convert always writes a batch: one message is a batch of one, read like any message."""
    our_entry = encode_batch(5000, "our-producer", [BatchMessage(1, b"only", "k", {"a": "b"}, 7)])
    with ScriptedPulsarBroker([pulsar_entry_from_batch(our_entry)]) as broker:
        client = official_client(broker.url)
        try:
            consumer = client.subscribe(TOPIC, "subscription")
            message = consumer.receive(timeout_millis=5000)
            consumer.acknowledge(message)
            consumer.close()
        finally:
            client.close()
    assert not broker.errors
    assert (message.data(), message.partition_key(), message.properties()) == (b"only", "k", {"a": "b"})
    (ack,) = broker.received(T.ACK)
    (acked,) = ack.command.ack.message_id
    assert (acked.ledgerId, acked.entryId) == (LEDGER_ID, message.message_id().entry_id())


def main() -> None:
    """Print the official client's CONNECT and SEND frames for the unit test's literals."""
    frames: dict[str, bytes] = {}
    for codec in CODECS:
        with ScriptedPulsarBroker() as broker:
            publish_batch(broker.url, codec)
        connect = next(raw for raw, frame in broker.frames if frame.command.type == T.CONNECT)
        frames.setdefault("CONNECT", connect)
        frames[f"SEND_{codec}"] = next(raw for raw, frame in broker.frames if frame.command.type == T.SEND)
    print(f"CLIENT_VERSION = {pulsar.__version__!r}")
    print("FRAMES = {")
    for name, raw in frames.items():
        print(f"    {name!r}: bytes.fromhex(")
        hex_text = raw.hex()
        for start in range(0, len(hex_text), 96):
            print(f'        "{hex_text[start : start + 96]}"')
        print("    ),")
    print("}")


if __name__ == "__main__":
    main()
