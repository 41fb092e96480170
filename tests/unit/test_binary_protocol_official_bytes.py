"""Goal: the decoder, entry reader, codecs and batch splitter read the official client's own
bytes — no network needed, so the quick unit loop checks them too.

Method: frames that ``pulsar-client`` 3.13.0 (the C++ client 4.2.0) sent to
tests/component/test_binary_protocol_official_client.py's scripted broker, recorded by that
module's ``main()``: its CONNECT, and one SEND per codec of a three-message batch (payload
``b"payload %d " * 8``, properties ``{"index": "%d"}``, key ``key-%d``, ordering key
``order-%d``, event time ``1000 + %d``, sequence id ``100 + %d``). Re-record after a client
upgrade: ``python -m tests.component.test_binary_protocol_official_client``.
"""

from __future__ import annotations

import pytest

from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.batch import split_batch
from minipulsar.binary_protocol.convert import batch_from_pulsar_entry
from minipulsar.binary_protocol.entry import parse_entry, sticky_key
from minipulsar.binary_protocol.frames import PulsarFrame, PulsarFrameDecoder, encode_headers_and_payload
from minipulsar.protocol.batch import BatchMessage, decode_batch

T = api.BaseCommand

CLIENT_VERSION = "3.13.0"
FRAMES = {
    "CONNECT": bytes.fromhex(
        "0000002900000025080212210a1150756c7361722d4350502d76342e322e3020142a046e6f6e65520408011001"
    ),
    "SEND_NONE": bytes.fromhex(
        "000001ac0000000a080632060800106418030e01dd64cf4f0000002f0a1173637269707465642d70726f647563657210"
        "6418999a9dd8a33432056b65792d3058039201076f726465722d30000000230a0a0a05696e64657812013012056b6579"
        "2d30185028e8073a076f726465722d3040647061796c6f61642030207061796c6f61642030207061796c6f6164203020"
        "7061796c6f61642030207061796c6f61642030207061796c6f61642030207061796c6f61642030207061796c6f616420"
        "3020000000230a0a0a05696e64657812013112056b65792d31185028e9073a076f726465722d3140657061796c6f6164"
        "2031207061796c6f61642031207061796c6f61642031207061796c6f61642031207061796c6f61642031207061796c6f"
        "61642031207061796c6f61642031207061796c6f6164203120000000230a0a0a05696e64657812013212056b65792d32"
        "185028ea073a076f726465722d3240667061796c6f61642032207061796c6f61642032207061796c6f61642032207061"
        "796c6f61642032207061796c6f61642032207061796c6f61642032207061796c6f61642032207061796c6f6164203220"
    ),
    "SEND_LZ4": bytes.fromhex(
        "000000c20000000a080632060800106418030e01b718afb2000000340a1173637269707465642d70726f647563657210"
        "6418a59a9dd8a33432056b65792d30400148e50258039201076f726465722d30ff22000000230a0a0a05696e64657812"
        "013012056b65792d30185028e8073a076f726465722d3040647061796c6f61642030200a00330b770012317700553118"
        "5028e97700343140656d00153177000f0a002b0b7700123277005532185028ea7700343240667700153277000f0a0026"
        "506164203220"
    ),
    "SEND_ZLIB": bytes.fromhex(
        "000000b20000000a080632060800106418030e016d1fb550000000340a1173637269707465642d70726f647563657210"
        "64188f9b9dd8a33432056b65792d30400248e50258039201076f726465722d30789c63606050e6e2e262cdcc4b49ad10"
        "62341062cd4eadd4359008d078c16ec59e5f94925aa46be09052905899939f98a260a0401d1603aab586106b0d81d6be"
        "845b6be8900ad360a8401d169ab546106b8d80d6be825b6be49006d360a4401d1600c5e96c49"
    ),
    "SEND_ZSTD": bytes.fromhex(
        "000000bb0000000a080632060800106418030e0173f34556000000340a1173637269707465642d70726f647563657210"
        "6418fb9b9dd8a33432056b65792d30400348e50258039201076f726465722d3028b52ffd6065002d0300540400000023"
        "0a0a0a05696e64657812013012056b65792d30185028e8073a076f726465722d3040647061796c6f6164203020313118"
        "5028e9314065313232185028ea324066320d00031240b9800c50140c0c3a1b9001ca056480a230b01e3a1b53b44001"
    ),
    "SEND_SNAPPY": bytes.fromhex(
        "000000be0000000a080632060800106418030e01166e0328000000340a1173637269707465642d70726f647563657210"
        "6418e19c9dd8a33432056b65792d30400448e50258039201076f726465722d30e502c0000000230a0a0a05696e646578"
        "12013012056b65792d30185028e8073a076f726465722d3040647061796c6f6164203020fe0a00090a3a770000310977"
        "1031185028e9157708314065116d043120fe0a00090a3a7700003209771032185028ea157708324066116d00321577f6"
        "0a00"
    ),
}


def decode_one(raw: bytes) -> PulsarFrame:
    decoder = PulsarFrameDecoder()
    decoder.feed(raw)
    frame = decoder.next_frame()
    assert frame is not None and decoder.next_frame() is None
    return frame


def test_the_official_connect() -> None:
    frame = decode_one(FRAMES["CONNECT"])
    connect = frame.command.connect
    assert frame.command.type == T.CONNECT and frame.headers_and_payload is None
    assert (connect.client_version, connect.protocol_version, connect.auth_method_name) == (
        "Pulsar-CPP-v4.2.0",
        api.v20,
        "none",
    )
    assert connect.feature_flags.supports_auth_refresh and connect.feature_flags.supports_broker_entry_metadata


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_the_official_send_of_a_batch(codec: str) -> None:
    frame = decode_one(FRAMES[f"SEND_{codec}"])
    assert frame.command.type == T.SEND
    assert (frame.command.send.sequence_id, frame.command.send.num_messages) == (100, 3)
    assert frame.headers_and_payload is not None
    entry = parse_entry(frame.headers_and_payload)
    assert entry.checksum_ok is True
    metadata = entry.metadata
    assert api.CompressionType.Name(metadata.compression) == codec
    assert (metadata.sequence_id, metadata.num_messages_in_batch) == (100, 3)
    assert sticky_key(metadata) == b"order-0"  # the client puts the first message's keys on the batch
    singles = split_batch(metadata, entry.payload)
    assert [s.payload for s in singles] == [b"payload %d " % i * 8 for i in range(3)]
    assert [(s.metadata.sequence_id, s.metadata.event_time) for s in singles] == [(100 + i, 1000 + i) for i in range(3)]
    messages = decode_batch(batch_from_pulsar_entry(frame.headers_and_payload)).messages
    assert messages == [
        BatchMessage(100 + i, b"payload %d " % i * 8, f"key-{i}", {"index": str(i)}, 1000 + i, f"order-{i}")
        for i in range(3)
    ]


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_our_encoding_of_the_official_metadata_is_byte_identical(codec: str) -> None:
    """Same field order, same varints, same crc32c coverage: re-encoding what the client sent
    gives its bytes back."""
    headers_and_payload = decode_one(FRAMES[f"SEND_{codec}"]).headers_and_payload
    assert headers_and_payload is not None
    entry = parse_entry(headers_and_payload)
    assert encode_headers_and_payload(entry.metadata, entry.payload) == headers_and_payload


def test_the_official_frames_byte_at_a_time() -> None:
    stream = b"".join(FRAMES.values())
    decoder, kinds = PulsarFrameDecoder(), []
    for index in range(len(stream)):
        decoder.feed(stream[index : index + 1])
        while (frame := decoder.next_frame()) is not None:
            kinds.append(frame.command.type)
        decoder.compact()
    assert kinds == [T.CONNECT] + [T.SEND] * 5
