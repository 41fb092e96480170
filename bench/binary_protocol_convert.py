"""Micro-benchmark of Pulsar's entry format (minipulsar/binary_protocol): the cost per entry of
reading a stored Pulsar entry and of converting an entry between the two protocols' formats.

Run: ``.venv/bin/python bench/binary_protocol_convert.py``. The entry is a producer batch of
100 messages of 1 KiB (text-like, so codecs find a ratio), each with a key, two properties
and an event time. The figures decide where conversion happens: each entry is stored in the
format of the protocol that produced it, and converted at the edge only when a consumer of the
other protocol reads it, so a topic whose producers and consumers speak one protocol pays
nothing, and a mixed one pays the conversion once per dispatch.
Sketch: protobuf (upb) parses a ~100-byte MessageMetadata in ~1 µs, but in Python each
field read or set costs ~0.2 µs and each property (a KeyValue object) ~1-2 µs, so a batch costs
~4-10 µs per message to split or build: ~0.5-1.5 ms for this entry, ~10-40x what dispatching
it unconverted costs (checksum, metadata, MESSAGE header: ~10-40 µs).
"""

from __future__ import annotations

import random
import timeit
from collections.abc import Callable

from minipulsar.binary_protocol import commands, compression
from minipulsar.binary_protocol import pulsar_api_pb2 as api
from minipulsar.binary_protocol.batch import split_batch
from minipulsar.binary_protocol.convert import batch_from_pulsar_entry, pulsar_entry_from_batch
from minipulsar.binary_protocol.entry import parse_entry, parse_metadata, verify_checksum
from minipulsar.binary_protocol.frames import PulsarFrameDecoder, encode_headers_and_payload, encode_payload_command
from minipulsar.protocol import compression as ours
from minipulsar.protocol.batch import BatchMessage, decode_batch_items, encode_batch

MESSAGES = 100
MESSAGE_BYTES = 1024


def messages(seed: int = 7) -> list[BatchMessage]:
    rng = random.Random(seed)
    words = [bytes(rng.randrange(97, 123) for _ in range(rng.randint(2, 10))) for _ in range(300)]
    batch = []
    for index in range(MESSAGES):
        data = b" ".join(rng.choice(words) for _ in range(MESSAGE_BYTES // 4))[:MESSAGE_BYTES]
        properties = {"tenant": "acme", "index": str(index)}
        batch.append(BatchMessage(1000 + index, data, f"user-{index % 17}", properties, 1_700_000_000_000 + index))
    return batch


def per_call_us(function: Callable[[], object], seconds: float = 0.3) -> float:
    """Best of three runs of about ``seconds`` each, in µs per call."""
    number = max(1, int(seconds / max(timeit.timeit(function, number=1), 1e-7)))
    return min(timeit.repeat(function, number=number, repeat=3)) / number * 1e6


def report(name: str, function: Callable[[], object]) -> None:
    print(f"{name:58} {per_call_us(function):9.1f} µs/entry")


def pulsar_entry(batch: list[BatchMessage], codec: int) -> bytes:
    """The batch as an official producer would send it, compressed with ``codec``."""
    plain = parse_entry(pulsar_entry_from_batch(encode_batch(1_700_000_000_000, "producer-1", batch)))
    metadata = api.MessageMetadata()
    metadata.CopyFrom(plain.metadata)
    metadata.compression = codec  # type: ignore[assignment]
    return encode_headers_and_payload(metadata, compression.compress(codec, plain.payload))


def main() -> None:
    batch = messages()
    print(f"entry: {MESSAGES} messages x {MESSAGE_BYTES} B; a section per codec the producer used")
    for codec in (ours.NONE, ours.LZ4, ours.ZSTD, ours.ZLIB):
        our_entry = encode_batch(1_700_000_000_000, "producer-1", batch, codec)
        theirs = pulsar_entry(batch, compression.CODEC_OF_OURS.get(codec, api.NONE))
        entry = parse_entry(theirs)
        serialized_metadata = entry.metadata.SerializeToString()
        print(f"\n-- {codec}: ours {len(our_entry)} B, Pulsar's {len(theirs)} B")
        report("parse_entry (checksum, metadata, payload copy)", lambda e=theirs: parse_entry(e))
        report("protobuf MessageMetadata parse alone", lambda m=serialized_metadata: api.MessageMetadata.FromString(m))
        report("parse_metadata (dispatch path: no checksum, no copy)", lambda e=theirs: parse_metadata(e))
        report("verify_checksum (SEND path, before storing)", lambda e=theirs: verify_checksum(e))
        report("split_batch (inflate + 100 SingleMessageMetadata)", lambda e=entry: split_batch(e.metadata, e.payload))
        report("ours: decode_batch_items (for comparison)", lambda e=our_entry: decode_batch_items(e))
        report("convert ours -> Pulsar (pulsar_entry_from_batch)", lambda e=our_entry: pulsar_entry_from_batch(e))
        report("convert Pulsar -> ours (batch_from_pulsar_entry)", lambda e=theirs: batch_from_pulsar_entry(e))
    codecs(batch)
    dispatch(encode_batch(1_700_000_000_000, "producer-1", batch))


def codecs(batch: list[BatchMessage]) -> None:
    """What each codec costs on the uncompressed batch: the choice of a converted entry's codec."""
    raw = parse_entry(pulsar_entry(batch, api.NONE)).payload
    print(f"\n-- codecs on the {len(raw)} B batch")
    for codec in (api.LZ4, api.SNAPPY, api.ZSTD, api.ZLIB):
        compressed = compression.compress(codec, raw)
        name = compression.codec_name(codec)
        report(f"{name:6} compress ({len(raw) / len(compressed):.1f}x)", lambda c=codec: compression.compress(c, raw))
        report(f"{name:6} decompress", lambda c=codec, d=compressed: compression.decompress(c, d, len(raw)))


def dispatch(our_entry: bytes) -> None:
    """The per-entry framing costs of the broker's hot paths, around a stored entry."""
    pulsar_entry = pulsar_entry_from_batch(our_entry)
    header, body = encode_payload_command(commands.message(5, 123, 456), pulsar_entry)
    frame = header + bytes(body)
    decoder = PulsarFrameDecoder()

    def decode() -> object:
        decoder.feed(frame)
        result = decoder.next_frame()
        decoder.compact()
        return result

    print("\n-- framing (no conversion)")
    report(
        "MESSAGE header: commands.message + encode_payload_command",
        lambda: encode_payload_command(commands.message(5, 123, 456), pulsar_entry),
    )
    report(
        "SEND_RECEIPT: commands.send_receipt + encode", lambda: commands.send_receipt(1, 2, 3, 4).SerializeToString()
    )
    report(f"decode one {len(frame)} B frame (PulsarFrameDecoder)", decode)


if __name__ == "__main__":
    main()
