"""ADD_ENTRY_RESPONSE frames built from a fixed layout decode to the very command the codec
would have sent, also for ids at the edges of int64 and beyond (the general path)."""

from __future__ import annotations

import pytest

from minipulsar.protocol.codec import (
    decode_body,
    encode_add_entry_response,
    encode_add_entry_responses,
    encode_bytes,
)
from minipulsar.protocol.commands import AddEntry, AddEntryResponse
from minipulsar.protocol.frames import FrameDecoder

INT64_MAX = (1 << 63) - 1


@pytest.mark.parametrize(
    "request_id, ledger_id, entry_id",
    [
        (1, 2, 3),
        (0, 0, 0),
        (INT64_MAX, INT64_MAX, INT64_MAX),
        (-(1 << 63), 5, 6),
        ((1 << 64) - 1, 7, 8),
        (-1, 1, 1),
    ],
)
def test_a_response_frame_decodes_to_the_codec_command(request_id: int, ledger_id: int, entry_id: int) -> None:
    frame = encode_add_entry_response(request_id, ledger_id, entry_id)
    expected = AddEntryResponse(id=request_id, ledger_id=ledger_id, entry_id=entry_id)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_body(frame[4:]) == expected
    assert decode_body(encode_bytes(expected)[4:]) == expected


def test_responses_to_a_run_of_adds_are_one_buffer_of_frames_in_order() -> None:
    adds = [AddEntry(id=i, ledger_id=9, entry_id=100 + i, payload=b"") for i in range(5)]
    adds.append(AddEntry(id=1 << 63, ledger_id=9, entry_id=105, payload=b""))  # outside int64
    decoder = FrameDecoder()
    decoder.feed(encode_add_entry_responses(adds))
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(decode_body(frame))
    assert frames == [AddEntryResponse(id=a.id, ledger_id=9, entry_id=a.entry_id) for a in adds]
