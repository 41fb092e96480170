"""The journal's hot path: records admitted in one loop iteration reach the writer thread as
one batch, durable adds go into the storage and then to their sink once per run, and a group
too big for one ``pwritev`` is still written whole."""

from __future__ import annotations

import asyncio
import queue
from pathlib import Path

from minipulsar.bookie.journal.format import RecordType
from minipulsar.bookie.journal.group_commit import GroupCommitPolicy
from minipulsar.bookie.journal.journal import Journal, JournalSettings
from minipulsar.errors import UnknownServerError

KIB = 1024


def settings(**overrides) -> JournalSettings:
    policy = overrides.pop("policy", GroupCommitPolicy(max_group_wait_s=0))
    return JournalSettings(policy=policy, prealloc_bytes=overrides.pop("prealloc_bytes", 64 * KIB), **overrides)


class Add:
    """An ADD_ENTRY as the journal reads it."""

    __slots__ = ("entry_id", "lac", "ledger_id", "payload")

    def __init__(self, ledger_id: int, entry_id: int, payload: bytes) -> None:
        self.ledger_id, self.entry_id, self.lac, self.payload = ledger_id, entry_id, entry_id - 1, payload


class Sink:
    """Records every ``adds_done`` call; ``done`` resolves once ``expected`` adds completed."""

    def __init__(self, expected: int) -> None:
        self.calls: list[tuple[list[int], float, BaseException | None]] = []
        self.expected = expected
        self.done = asyncio.get_running_loop().create_future()

    def adds_done(self, requests: list[Add], started: float, error: BaseException | None) -> None:
        self.calls.append(([r.entry_id for r in requests], started, error))
        if sum(len(c[0]) for c in self.calls) >= self.expected and not self.done.done():
            self.done.set_result(None)


class Store:
    """The ledger storage as the journal sees it: what was put, what was given back."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.added: list[int] = []
        self.cancelled: list[int] = []
        self.completed_before_put = 0

    def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        self.completed_before_put += sum(entry_id in c[0] for c in self.sink.calls)
        self.added.append(entry_id)

    def cancel_admission(self, ledger_id: int, payload_length: int) -> None:
        self.cancelled.append(payload_length)


class CountingQueue(queue.SimpleQueue):
    puts = 0

    def put(self, item, block=True, timeout=None) -> None:
        self.puts += 1
        super().put(item, block, timeout)


async def test_records_admitted_in_one_loop_iteration_reach_the_writer_as_one_batch(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings())
    journal._queue = counting = CountingQueue()
    await journal.start()
    sink = Sink(50)
    journal.storage = Store(sink)
    for entry_id in range(50):
        assert journal.try_add(Add(1, entry_id, b"x" * 100), sink, 1.5)
    assert counting.puts == 0, "nothing is handed over before the loop iteration ends"
    await asyncio.wait_for(sink.done, 10)
    assert counting.puts == 1
    await journal.close()


async def test_durable_adds_go_into_the_storage_then_to_their_sink_once_per_run(tmp_path: Path) -> None:
    """Goal: a durable add is put into the storage before its sink hears of it, and the adds
    of one sink with the same arrival time come in one call, in order. Method: two runs
    (different ``started``) from one sink, and another sink in between."""
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    first, other = Sink(6), Sink(2)
    store = journal.storage = Store(first)
    for entry_id in range(3):
        journal.try_add(Add(1, entry_id, b"a"), first, 1.0)
    for entry_id in range(3, 5):
        journal.try_add(Add(2, entry_id, b"b"), other, 1.0)
    for entry_id in range(5, 8):
        journal.try_add(Add(1, entry_id, b"c"), first, 2.0)
    await asyncio.wait_for(asyncio.gather(first.done, other.done), 10)
    assert first.calls == [([0, 1, 2], 1.0, None), ([5, 6, 7], 2.0, None)]
    assert other.calls == [([3, 4], 1.0, None)]
    assert store.added == list(range(8)) and store.completed_before_put == 0
    await journal.close()


async def test_a_refused_add_gives_its_write_cache_room_back_and_tells_its_sink(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    sink = Sink(1)
    store = journal.storage = Store(sink)
    journal._failure = UnknownServerError("journal write failed: disk gone")
    assert journal.try_add(Add(1, 0, b"12345"), sink, 3.0)
    assert store.cancelled == [5] and store.added == []
    assert [(ids, started, type(error)) for ids, started, error in sink.calls] == [([0], 3.0, UnknownServerError)]
    journal._failure = None
    await journal.close()


async def test_adds_the_storage_fails_to_take_are_answered_with_an_error(tmp_path: Path) -> None:
    """Goal: if putting journaled adds into the storage raises (a bug), their sink still hears
    of them, with an error — they are not acknowledged, and not left unanswered until the
    client's timeout. Method: a store whose add_entry raises for one run of adds."""
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    sink = Sink(3)

    class FailingStore(Store):
        def add_entry(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
            raise RuntimeError("a bug in the write cache")

    journal.storage = FailingStore(sink)
    for entry_id in range(3):
        assert journal.try_add(Add(1, entry_id, b"x" * 10), sink, 1.0)
    await asyncio.wait_for(sink.done, 10)
    assert [(ids, type(error)) for ids, _, error in sink.calls] == [([0, 1, 2], UnknownServerError)]
    await journal.close()


async def test_a_group_bigger_than_one_pwritev_is_written_whole(tmp_path: Path) -> None:
    """Goal: a group of more than IOV_MAX buffers (two per record) is written completely and in
    order. Method: 1500 records queued in one loop iteration, then replay."""
    journal = Journal(tmp_path, 0, settings(prealloc_bytes=1024 * KIB))
    await journal.start()
    futures = []
    for entry_id in range(1500):
        future = asyncio.get_running_loop().create_future()
        assert journal.try_add_entry(3, entry_id, entry_id - 1, entry_id.to_bytes(4, "big") * 8, future)
        futures.append(future)
    locations = await asyncio.gather(*futures)
    assert journal.stats.group_sizes == [1500]
    await journal.close()
    seen = []
    Journal(tmp_path, 0, settings()).replay(
        lambda record, location, payload: seen.append((record.type, record.entry_id, bytes(payload), location))
    )
    assert seen == [(RecordType.ADD_ENTRY, i, i.to_bytes(4, "big") * 8, locations[i]) for i in range(1500)]
