"""Stall diagnostics: off by default, a bounded ring, GC collections and spans recorded, the
JSONL file shared by processes read back in time order."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from minipulsar import diagnostics


@pytest.fixture
def installed() -> Iterator[diagnostics.EventRing]:
    events = diagnostics.install(maxlen=8)
    yield events
    diagnostics.uninstall()


def test_recording_is_a_no_op_until_installed() -> None:
    assert diagnostics.ring() is None
    diagnostics.record("checkpoint", 1.0)
    with diagnostics.span("dir_flush") as fields:
        fields["bytes"] = 1
    assert diagnostics.ring() is None


def test_the_ring_keeps_the_newest_events(installed: diagnostics.EventRing) -> None:
    for index in range(20):
        diagnostics.record("tick", t=float(index), index=index)
    assert [e[3]["index"] for e in installed.events] == list(range(12, 20))
    assert installed.recorded == 20
    assert [e[0] for e in installed.between(14.0, 15.0)] == [14.0, 15.0]


def test_a_span_records_its_start_duration_and_fields_even_when_it_fails(installed: diagnostics.EventRing) -> None:
    with diagnostics.span("dir_flush", dir="a") as fields:
        fields["bytes"] = 42
    with pytest.raises(OSError), diagnostics.span("last_mark"):
        raise OSError("disk")
    (flush_t, flush, flush_ms, flush_fields), (_, mark, _, mark_fields) = installed.take_new()
    assert (flush, mark) == ("dir_flush", "last_mark")
    assert flush_ms is not None and flush_ms >= 0 and flush_t > 0
    assert flush_fields == {"dir": "a", "bytes": 42} and mark_fields == {"failed": True}
    assert installed.take_new() == [], "taken once"


def test_a_full_collection_is_recorded(installed: diagnostics.EventRing) -> None:
    gc.collect()
    assert any(kind == "gc" and fields["generation"] == 2 for _, kind, _, fields in installed.events)


def test_the_file_sink_appends_lines_that_read_back_in_time_order(
    installed: diagnostics.EventRing, tmp_path: Path
) -> None:
    path = tmp_path / "diagnostics.jsonl"
    diagnostics.record("checkpoint", 5.0, t=2.0, bytes=10)
    assert diagnostics.FileSink(path, installed, "bookie").write_new() == 1
    diagnostics.record("loop_lag", 3.0, t=1.0)
    diagnostics.FileSink(path, installed, "broker").write_new()
    with path.open("a") as file:
        file.write('{"t": 3.0, "kind": "torn')  # a process killed mid-line
    events = diagnostics.read_events(path)
    assert [(e["t"], e["kind"], e["role"]) for e in events] == [
        (1.0, "loop_lag", "broker"),
        (2.0, "checkpoint", "bookie"),
    ]
    assert events[1]["duration_ms"] == 5.0 and events[1]["bytes"] == 10
    assert diagnostics.read_events(tmp_path / "missing.jsonl") == []
