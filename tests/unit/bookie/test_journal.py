"""The journal on real files: group commit, replay, torn and corrupt tails, rollover, fences,
back-pressure. Each test runs a real writer thread in a temp dir."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest

from minipulsar.bookie.journal.format import RECORD_HEADER_SIZE, EntryLocation, JournalRecord, RecordType
from minipulsar.bookie.journal.group_commit import FlushReason, GroupCommitPolicy
from minipulsar.bookie.journal.journal import Journal, JournalSettings
from minipulsar.bookie.journal.segment import list_segments, segment_path

KIB = 1024


def settings(**overrides) -> JournalSettings:
    policy = overrides.pop("policy", GroupCommitPolicy(max_group_wait_s=0))
    return JournalSettings(policy=policy, prealloc_bytes=overrides.pop("prealloc_bytes", 64 * KIB), **overrides)


def replay(directory: Path, journal_settings: JournalSettings | None = None):
    journal = Journal(directory, 0, journal_settings or settings())
    seen: list[tuple[JournalRecord, EntryLocation, bytes]] = []
    result = journal.replay(lambda r, loc, p: seen.append((r, loc, bytes(p))))
    return journal, seen, result


def submit(journal: Journal, ledger_id: int, entry_id: int, payload: bytes) -> asyncio.Future | None:
    """Queue an add without waiting; its future, or None when the journal is full."""
    future = asyncio.get_running_loop().create_future()
    return future if journal.try_add_entry(ledger_id, entry_id, entry_id - 1, payload, future) else None


def adds(seen) -> list[tuple[int, int, bytes]]:
    return [(r.ledger_id, r.entry_id, p) for r, _, p in seen if r.type is RecordType.ADD_ENTRY]


async def test_adds_queued_together_form_one_group_with_one_fsync(tmp_path: Path) -> None:
    """Goal: N adds queued in one loop iteration are written and synced as one group.
    Method: a long group wait and an entries threshold of N, so only the count triggers it."""
    journal = Journal(
        tmp_path, 0, settings(policy=GroupCommitPolicy(max_group_wait_s=30, buffered_entries_threshold=8))
    )
    await journal.start()
    futures = [submit(journal, 1, i, b"x" * 100) for i in range(8)]
    locations = await asyncio.gather(*futures)
    assert journal.stats.groups == 1 and journal.stats.syncs == 1
    assert journal.stats.flushes[FlushReason.MAX_ENTRIES] == 1
    assert journal.stats.group_sizes == [8]
    assert [loc.offset for loc in locations] == sorted(loc.offset for loc in locations)
    await journal.close()


async def test_sequential_adds_are_one_group_each(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    for i in range(5):
        await journal.add_entry(1, i, -1, b"y")
    assert journal.stats.groups == 5 and journal.stats.syncs == 5
    assert journal.stats.flushes[FlushReason.MAX_WAIT] == 5
    await journal.close()


async def test_no_sync_when_journal_sync_data_is_off(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings(sync_data=False))
    await journal.start()
    await journal.add_entry(1, 0, -1, b"z")
    assert journal.stats.groups == 1 and journal.stats.syncs == 0
    await journal.close()


async def test_flush_when_queue_empty_does_not_wait_for_the_group_timeout(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings(policy=GroupCommitPolicy(max_group_wait_s=60, flush_when_queue_empty=True)))
    await journal.start()
    await asyncio.wait_for(journal.add_entry(1, 0, -1, b"z"), 10)
    assert journal.stats.flushes[FlushReason.EMPTY_QUEUE] == 1
    await journal.close()


async def test_close_writes_what_is_pending(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings(policy=GroupCommitPolicy(max_group_wait_s=60)))
    await journal.start()
    future = submit(journal, 3, 0, b"pending")
    await journal.close()
    assert future.done() and future.result().length == len(b"pending")
    assert journal.stats.flushes[FlushReason.SHUTDOWN] == 1
    _, seen, _ = replay(tmp_path)
    assert adds(seen) == [(3, 0, b"pending")]


async def test_replay_returns_every_record_with_its_location(tmp_path: Path) -> None:
    rng = random.Random(3)
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    written, locations = [], []
    for i in range(50):
        payload = rng.randbytes(rng.randint(0, 2000))
        written.append((i % 4, i, payload))
        locations.append(await journal.add_entry(i % 4, i, i - 1, payload))
    await journal.add_fence(2)
    await journal.close()
    _, seen, result = replay(tmp_path)
    assert adds(seen) == written
    assert [loc for r, loc, _ in seen if r.type is RecordType.ADD_ENTRY] == locations
    assert [r.ledger_id for r, _, _ in seen if r.type is RecordType.FENCE] == [2]
    assert result.records == 51 and not result.lost_tail


async def test_segments_are_preallocated_with_zeros(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings(prealloc_bytes=64 * KIB))
    await journal.start()
    await journal.add_entry(1, 0, -1, b"a" * 100)
    await journal.close()
    path = segment_path(tmp_path, list_segments(tmp_path)[0])
    assert os.path.getsize(path) == 64 * KIB
    data = path.read_bytes()
    assert data[200:] == bytes(len(data) - 200)


async def _write(directory: Path, entries: list[tuple[int, int, bytes]], **kw) -> list[EntryLocation]:
    journal = Journal(directory, 0, settings(**kw))
    journal.replay(lambda *a: None)
    await journal.start()
    locations = [await journal.add_entry(ledger, entry, -1, payload) for ledger, entry, payload in entries]
    await journal.close()
    return locations


@pytest.mark.parametrize("damage", ["cut", "garbage", "bitflip"])
async def test_a_damaged_tail_is_dropped_and_new_writes_replay_after_the_good_records(
    tmp_path: Path, damage: str
) -> None:
    """Goal: replay stops cleanly at a torn or corrupt last record, and records appended after a
    restart are replayed after the good ones, never mixed with the damaged bytes.
    Method: damage the last record on disk, restart, append, replay."""
    first = [(1, i, bytes([i]) * 500) for i in range(10)]
    locations = await _write(tmp_path, first)
    path = segment_path(tmp_path, locations[-1].segment_id)
    last = locations[-1]
    with open(path, "r+b") as f:
        if damage == "cut":
            f.truncate(last.offset + 100)  # mid-payload of the last record
        elif damage == "garbage":
            f.seek(last.offset - RECORD_HEADER_SIZE)
            f.write(random.Random(5).randbytes(RECORD_HEADER_SIZE + last.length + 300))
        else:
            f.seek(last.offset + 7)
            f.write(bytes([path.read_bytes()[last.offset + 7] ^ 1]))
    _, seen, result = replay(tmp_path)
    assert adds(seen) == first[:-1] and result.lost_tail
    second = [(2, i, bytes([100 + i]) * 40) for i in range(5)]
    await _write(tmp_path, second)
    _, seen, result = replay(tmp_path)
    assert adds(seen) == first[:-1] + second
    assert not result.lost_tail


async def test_rollover_starts_new_segments_and_replay_reads_them_in_order(tmp_path: Path) -> None:
    entries = [(7, i, random.Random(i).randbytes(1000)) for i in range(200)]
    locations = await _write(tmp_path, entries, max_segment_bytes=32 * KIB, prealloc_bytes=16 * KIB)
    segments = list_segments(tmp_path)
    assert len(segments) >= 6
    assert sorted({loc.segment_id for loc in locations}) == segments[: len({loc.segment_id for loc in locations})]
    for segment_id in segments[:-1]:
        assert os.path.getsize(segment_path(tmp_path, segment_id)) <= 48 * KIB
    _, seen, result = replay(tmp_path)
    assert adds(seen) == entries
    assert [loc for r, loc, _ in seen] == locations
    assert result.segments == len(segments)


async def test_restart_appends_to_the_last_segment_and_rolls_when_it_is_full(tmp_path: Path) -> None:
    await _write(tmp_path, [(1, 0, b"a")])
    await _write(tmp_path, [(1, 1, b"b")])
    assert len(list_segments(tmp_path)) == 1
    _, seen, _ = replay(tmp_path)
    assert adds(seen) == [(1, 0, b"a"), (1, 1, b"b")]


async def test_fence_records_replay(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    await journal.add_entry(4, 0, -1, b"e")
    await journal.add_fence(4)
    await journal.add_fence(9)
    await journal.close()
    _, seen, _ = replay(tmp_path)
    assert [(r.type, r.ledger_id) for r, _, _ in seen] == [
        (RecordType.ADD_ENTRY, 4),
        (RecordType.FENCE, 4),
        (RecordType.FENCE, 9),
    ]


async def test_a_full_queue_makes_producers_wait_and_drops_nothing(tmp_path: Path) -> None:
    """Goal: past journalQueueSize, adds wait for room (FIFO) instead of failing or being dropped."""
    journal = Journal(tmp_path, 0, settings(queue_entries_max=4, policy=GroupCommitPolicy(max_group_wait_s=0.005)))
    await journal.start()
    queued = [submit(journal, 1, i, b"q") for i in range(4)]
    assert all(f is not None for f in queued)
    assert submit(journal, 1, 4, b"q") is None
    locations = await asyncio.gather(*queued, *(journal.add_entry(1, i, -1, b"q") for i in range(4, 40)))
    assert len(locations) == 40
    await journal.close()
    _, seen, _ = replay(tmp_path)
    assert sorted(e for _, e, _ in adds(seen)) == list(range(40))


async def test_an_add_completes_only_after_its_group_is_synced(tmp_path: Path, monkeypatch) -> None:
    """Goal: no add is acknowledged before the fdatasync of its group returned.
    Method: hold the writer thread inside sync; the future must stay pending until released."""
    import threading

    from minipulsar.bookie.journal import segment as journal_segment

    in_sync, release = threading.Event(), threading.Event()
    real_write = journal_segment.SegmentWriter.append_synced  # the group's write + fdatasync

    def held_sync(self, buffers, size=-1) -> int:
        in_sync.set()
        release.wait(10)
        return real_write(self, buffers, size)

    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", held_sync)
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    future = submit(journal, 1, 0, b"durable?")
    assert await asyncio.to_thread(in_sync.wait, 10)
    await asyncio.sleep(0.05)  # give a wrong implementation the chance to complete early
    assert not future.done()
    release.set()
    assert (await future).length == len(b"durable?")
    await journal.close()


async def test_a_failed_write_fails_its_group_and_every_later_add(tmp_path: Path, monkeypatch) -> None:
    from minipulsar.bookie.journal import segment as journal_segment

    def failing_append(self, buffers, size=-1) -> int:
        raise OSError(28, "No space left on device")

    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    await journal.add_entry(1, 0, -1, b"before")
    monkeypatch.setattr(journal_segment.SegmentWriter, "append", failing_append)
    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", failing_append)
    with pytest.raises(Exception, match="No space left"):
        await journal.add_entry(1, 1, -1, b"lost")
    monkeypatch.undo()
    with pytest.raises(Exception, match="No space left"):
        await journal.add_entry(1, 2, -1, b"refused")
    await journal.close()
    _, seen, _ = replay(tmp_path)
    assert adds(seen) == [(1, 0, b"before")]


@pytest.mark.parametrize("where", ["group timer", "flush decision", "batch split"])
async def test_a_failure_assembling_groups_fails_the_journal_and_answers_every_add(
    tmp_path: Path, monkeypatch, where: str
) -> None:
    """Goal: an unexpected error on the writer thread outside the write itself (a bug; it was
    journalMaxGroupWaitMSec=inf's OverflowError in the group timer) fails the journal like a
    failed write: the adds being grouped and every later one are answered with the error, none
    waits forever, and the journal still closes. Method: the group timer, the policy's flush
    decision, or the split of a batch at a group boundary (the batch then in hand) raises."""
    from minipulsar.bookie.journal import writer_thread as journal_thread

    def broken_wait(self, group):
        if group:
            raise OverflowError("timeout value is too large")
        return self._queue.get()

    def broken_decision(self, *args):
        raise ValueError("a bug in the policy")

    journal = Journal(
        tmp_path,
        0,
        settings(policy=GroupCommitPolicy(max_group_wait_s=1.0, adaptive_group_writes=where != "batch split")),
    )
    await journal.start()
    if where == "group timer":
        monkeypatch.setattr(journal_thread.JournalThread, "_next_item", broken_wait)
    elif where == "flush decision":
        monkeypatch.setattr(GroupCommitPolicy, "should_flush", broken_decision)
    else:
        monkeypatch.setattr(journal_thread, "split_batch", broken_decision)
    with pytest.raises(Exception, match="journal writer failed"):
        await asyncio.wait_for(journal.add_entry(1, 0, -1, b"grouped"), 10)
    with pytest.raises(Exception, match="journal writer failed"):
        await asyncio.wait_for(journal.add_entry(1, 1, -1, b"refused"), 10)
    await asyncio.wait_for(journal.close(), 10)


@pytest.mark.parametrize("adaptive", [True, False])
async def test_adaptive_group_writes_decide_whether_a_group_takes_the_whole_queue(
    tmp_path: Path, monkeypatch, adaptive: bool
) -> None:
    """Goal: journalAdaptiveGroupWrites=true puts everything queued into one group (one fsync);
    false caps each group at journalBufferedEntriesThreshold. Method: hold the writer in the
    fsync of a first add while 10 more are queued (threshold 4), then release it."""
    import threading

    from minipulsar.bookie.journal import segment as journal_segment

    in_sync, release = threading.Event(), threading.Event()
    real_write = journal_segment.SegmentWriter.append_synced  # the group's write + fdatasync

    def held_sync(self, buffers, size=-1) -> int:
        in_sync.set()
        release.wait(10)
        return real_write(self, buffers, size)

    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", held_sync)
    journal = Journal(
        tmp_path,
        0,
        settings(
            policy=GroupCommitPolicy(max_group_wait_s=0, buffered_entries_threshold=4, adaptive_group_writes=adaptive)
        ),
    )
    await journal.start()
    first = submit(journal, 1, 0, b"x")
    assert await asyncio.to_thread(in_sync.wait, 10)
    queued = [submit(journal, 1, i, b"x") for i in range(1, 11)]
    release.set()
    await asyncio.gather(first, *queued)
    assert journal.stats.group_sizes == ([1, 10] if adaptive else [1, 4, 4, 2])
    await journal.close()


async def test_applied_mark_moves_past_each_completed_group_and_replay_starts_there(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    first = await journal.add_entry(1, 0, -1, b"a" * 10)
    mark = journal.applied_mark
    assert mark is not None and mark.offset == first.offset + first.length
    await journal.add_entry(1, 1, -1, b"b" * 10)
    await journal.close()
    seen = []
    result = Journal(tmp_path, 0, settings()).replay(lambda r, loc, p: seen.append((r.entry_id, bytes(p))), mark)
    assert seen == [(1, b"b" * 10)] and result.records == 1


async def test_applied_mark_waits_for_the_loop_not_for_the_fsync(tmp_path: Path, monkeypatch) -> None:
    """Goal: a checkpoint never captures a group that is durable but whose completions (the
    storage adds) have not run on the loop yet — else its entries would be neither in the
    flushed write-cache half nor replayed. Method: block the loop until the writer thread has
    synced the group; the mark must not have moved; it moves once the loop ran the group."""
    import threading

    from minipulsar.bookie.journal import segment as journal_segment

    synced = threading.Event()
    real_write = journal_segment.SegmentWriter.append_synced

    def sync_and_tell(self, buffers, size=-1) -> int:
        start = real_write(self, buffers, size)
        synced.set()
        return start

    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    await journal.add_entry(1, 0, -1, b"first")
    before = journal.applied_mark
    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", sync_and_tell)
    future = submit(journal, 1, 1, b"second")
    await asyncio.sleep(0)  # the loop hands this iteration's records to the writer thread
    assert synced.wait(10)  # blocking the loop on purpose: the group's completion cannot run
    time.sleep(0.01)
    assert journal.applied_mark == before
    await future
    assert journal.applied_mark > before
    await journal.close()


async def test_a_journal_whose_files_fail_to_close_still_stops(tmp_path: Path, monkeypatch) -> None:
    """Goal: close() returns even when closing the segments fails (EIO from a failing disk):
    the bookie's shutdown must not hang on it."""
    from minipulsar.bookie.journal import directory as journal_files

    def failing_close(self) -> None:
        raise OSError(5, "Input/output error")

    journal = Journal(tmp_path, 0, settings())
    await journal.start()
    await journal.add_entry(1, 0, -1, b"written")
    monkeypatch.setattr(journal_files.JournalFiles, "close", failing_close)
    await asyncio.wait_for(journal.close(), 10)
