"""The journal's hot path: records admitted in one loop iteration reach the writer thread as
one batch, durable adds go into the storage and then to their sink once per run, and a group
too big for one ``pwritev`` is still written whole."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from minipulsar.bookie.journal.journal import Journal
from minipulsar.errors import UnknownServerError
from tests.support.journal import KIB, Add, RecordingSink, RecordingStore, new_journal, replay, submit


class CountingQueue(queue.SimpleQueue):
    puts = 0

    def put(self, item, block=True, timeout=None) -> None:
        self.puts += 1
        super().put(item, block, timeout)


def store_of(journal: Journal) -> RecordingStore:
    store = journal._storage
    assert isinstance(store, RecordingStore)
    return store


async def test_records_admitted_in_one_loop_iteration_reach_the_writer_as_one_batch(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    journal._queue = counting = CountingQueue()
    await journal.start()
    sink = RecordingSink()
    for entry_id in range(50):
        assert submit(journal, sink, Add(1, entry_id, b"x" * 100), started=1.5)
    assert counting.puts == 0, "nothing is handed over before the loop iteration ends"
    await sink.wait(50)
    assert counting.puts == 1
    await journal.close()


async def test_durable_adds_go_into_the_storage_then_to_their_sink_once_per_run(tmp_path: Path) -> None:
    """Goal: a durable add is put into the storage before its sink hears of it, and the adds
    of one sink with the same arrival time come in one call, in order. Method: two runs
    (different ``started``) from one sink, and another sink in between."""
    first, other = RecordingSink(), RecordingSink()

    class CheckingStore(RecordingStore):
        completed_before_put = 0

        def add_entries(self, requests: Sequence[Any]) -> None:
            told = [r for sink in (first, other) for call in sink.calls for r in call.requests]
            self.completed_before_put += sum(any(r is t for t in told) for r in requests)
            super().add_entries(requests)

    journal = new_journal(tmp_path)
    store = CheckingStore()
    journal.attach_storage(store)
    await journal.start()
    for entry_id in range(3):
        submit(journal, first, Add(1, entry_id, b"a"), started=1.0)
    for entry_id in range(3, 5):
        submit(journal, other, Add(2, entry_id, b"b"), started=1.0)
    for entry_id in range(5, 8):
        submit(journal, first, Add(1, entry_id, b"c"), started=2.0)
    await asyncio.gather(first.wait(6), other.wait(2))
    assert [([r.entry_id for r in c.requests], c.started, c.error) for c in first.calls] == [
        ([0, 1, 2], 1.0, None),
        ([5, 6, 7], 2.0, None),
    ]
    assert [([r.entry_id for r in c.requests], c.started, c.error) for c in other.calls] == [([3, 4], 1.0, None)]
    assert [[r.entry_id for r in run] for run in store.runs] == [[0, 1, 2], [3, 4], [5, 6, 7]]
    assert store.completed_before_put == 0
    await journal.close()


async def test_a_refused_add_gives_its_write_cache_room_back_and_tells_its_sink(tmp_path: Path) -> None:
    journal = new_journal(tmp_path)
    await journal.start()
    sink = RecordingSink()
    journal._failure = UnknownServerError("journal write failed: disk gone")
    assert submit(journal, sink, Add(1, 0, b"12345"), started=3.0)
    assert store_of(journal).cancelled == [5] and store_of(journal).added == []
    assert [([r.entry_id for r in c.requests], c.started, type(c.error)) for c in sink.calls] == [
        ([0], 3.0, UnknownServerError)
    ]
    journal._failure = None
    await journal.close()


@pytest.mark.expect_error_log(r"storing journaled entries failed")
async def test_adds_the_storage_fails_to_take_are_answered_with_an_error(tmp_path: Path) -> None:
    """Goal: if putting journaled adds into the storage raises (a bug), their sink still hears
    of them, with an error — they are not acknowledged, and not left unanswered until the
    client's timeout. Method: a store whose add_entries raises for one run of adds."""

    class FailingStore(RecordingStore):
        def add_entries(self, requests: Sequence[Any]) -> None:
            raise RuntimeError("a bug in the write cache")

    journal = new_journal(tmp_path)
    journal.attach_storage(FailingStore())
    await journal.start()
    sink = RecordingSink()
    assert submit(journal, sink, *(Add(1, entry_id, b"x" * 10) for entry_id in range(3)), started=1.0)
    await sink.wait(3)
    assert [([r.entry_id for r in c.requests], type(c.error)) for c in sink.calls] == [([0, 1, 2], UnknownServerError)]
    await journal.close()


async def test_a_group_bigger_than_one_pwritev_is_written_whole(tmp_path: Path) -> None:
    """Goal: a group of more than IOV_MAX buffers (two per record) is written completely and in
    order. Method: 1500 records queued in one loop iteration, then replay."""
    journal = new_journal(tmp_path, prealloc_bytes=1024 * KIB)
    await journal.start()
    sink = RecordingSink()
    for entry_id in range(1500):
        assert submit(journal, sink, Add(3, entry_id, entry_id.to_bytes(4, "big") * 8))
    await sink.wait(1500)
    assert journal.stats.group_sizes == [1500]
    await journal.close()
    assert replay(tmp_path).adds == [(3, i, i.to_bytes(4, "big") * 8) for i in range(1500)]
