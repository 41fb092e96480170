"""The journal on real files: group commit, replay, torn and corrupt tails, rollover, fences,
back-pressure. Each test runs a real writer thread in a temp dir."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest

from minipulsar.bookie.journal.directory import list_segments
from minipulsar.bookie.journal.format import RECORD_HEADER_SIZE, LogMark, RecordType
from minipulsar.bookie.journal.group_commit import FlushReason, GroupCommitPolicy
from minipulsar.bookie.journal.journal import Fence
from minipulsar.bookie.journal.segment import segment_path
from tests.support.journal import (
    KIB,
    Add,
    RecordingSink,
    add_durably,
    admit,
    fence_durably,
    replay,
    started_journal,
    submit,
    write,
)


async def test_adds_queued_together_form_one_group_with_one_fsync(tmp_path: Path) -> None:
    """Goal: N adds queued in one loop iteration are written and synced as one group, in order.
    Method: a long group wait and an entries threshold of N, so only the count triggers it."""
    journal = await started_journal(
        tmp_path, policy=GroupCommitPolicy(max_group_wait_s=30, buffered_entries_threshold=8)
    )
    sink = RecordingSink()
    for i in range(8):
        assert submit(journal, sink, Add(1, i, b"x" * 100))
    await sink.wait(8)
    assert journal.stats.groups == 1 and journal.stats.syncs == 1
    assert journal.stats.flushes[FlushReason.MAX_ENTRIES] == 1
    assert journal.stats.group_sizes == [8]
    assert [[r.entry_id for r in call.requests] for call in sink.calls] == [list(range(8))]
    await journal.close()
    assert [entry_id for _, entry_id, _ in replay(tmp_path).adds] == list(range(8))


async def test_sequential_adds_are_one_group_each(tmp_path: Path) -> None:
    journal = await started_journal(tmp_path)
    for i in range(5):
        await add_durably(journal, 1, i, b"y")
    assert journal.stats.groups == 5 and journal.stats.syncs == 5
    assert journal.stats.flushes[FlushReason.MAX_WAIT] == 5
    await journal.close()


async def test_no_sync_when_journal_sync_data_is_off(tmp_path: Path) -> None:
    journal = await started_journal(tmp_path, sync_data=False)
    await add_durably(journal, 1, 0, b"z")
    assert journal.stats.groups == 1 and journal.stats.syncs == 0
    await journal.close()


async def test_flush_when_queue_empty_does_not_wait_for_the_group_timeout(tmp_path: Path) -> None:
    journal = await started_journal(
        tmp_path, policy=GroupCommitPolicy(max_group_wait_s=60, flush_when_queue_empty=True)
    )
    await add_durably(journal, 1, 0, b"z")
    assert journal.stats.flushes[FlushReason.EMPTY_QUEUE] == 1
    await journal.close()


async def test_close_writes_what_is_pending(tmp_path: Path) -> None:
    journal = await started_journal(tmp_path, policy=GroupCommitPolicy(max_group_wait_s=60))
    sink = RecordingSink()
    assert submit(journal, sink, Add(3, 0, b"pending"))
    await journal.close()
    assert sink.completed == 1 and sink.errors() == [None]
    assert journal.stats.flushes[FlushReason.SHUTDOWN] == 1
    assert replay(tmp_path).adds == [(3, 0, b"pending")]


async def test_replay_returns_every_record_with_its_location(tmp_path: Path) -> None:
    rng = random.Random(3)
    journal = await started_journal(tmp_path)
    written = []
    for i in range(50):
        payload = rng.randbytes(rng.randint(0, 2000))
        written.append((i % 4, i, payload))
        await add_durably(journal, i % 4, i, payload)
    await fence_durably(journal, 2)
    await journal.close()
    replayed = replay(tmp_path)
    assert replayed.adds == written
    for (_, _, payload), location in zip(written, replayed.locations):
        path = segment_path(tmp_path, location.segment_id)
        with open(path, "rb") as segment:
            segment.seek(location.offset)
            assert segment.read(location.length) == payload and location.length == len(payload)
    assert [r.ledger_id for r, _, _ in replayed.records if r.type is RecordType.FENCE] == [2]
    assert replayed.result.records == 51 and not replayed.result.lost_tail


async def test_segments_are_preallocated_with_zeros(tmp_path: Path) -> None:
    journal = await started_journal(tmp_path, prealloc_bytes=64 * KIB)
    await add_durably(journal, 1, 0, b"a" * 100)
    await journal.close()
    path = segment_path(tmp_path, list_segments(tmp_path)[0])
    assert os.path.getsize(path) == 64 * KIB
    data = path.read_bytes()
    assert data[200:] == bytes(len(data) - 200)


@pytest.mark.parametrize("damage", ["cut", "garbage", "bitflip"])
async def test_a_damaged_tail_is_dropped_and_new_writes_replay_after_the_good_records(
    tmp_path: Path, damage: str
) -> None:
    """Goal: replay stops cleanly at a torn or corrupt last record, and records appended after a
    restart are replayed after the good ones, never mixed with the damaged bytes.
    Method: damage the last record on disk, restart, append, replay."""
    first = [(1, i, bytes([i]) * 500) for i in range(10)]
    await (await write(tmp_path, first)).close()
    last = replay(tmp_path).locations[-1]
    path = segment_path(tmp_path, last.segment_id)
    with open(path, "r+b") as f:
        if damage == "cut":
            f.truncate(last.offset + 100)  # mid-payload of the last record
        elif damage == "garbage":
            f.seek(last.offset - RECORD_HEADER_SIZE)
            f.write(random.Random(5).randbytes(RECORD_HEADER_SIZE + last.length + 300))
        else:
            f.seek(last.offset + 7)
            f.write(bytes([path.read_bytes()[last.offset + 7] ^ 1]))
    replayed = replay(tmp_path)
    assert replayed.adds == first[:-1] and replayed.result.lost_tail
    second = [(2, i, bytes([100 + i]) * 40) for i in range(5)]
    await (await write(tmp_path, second)).close()
    replayed = replay(tmp_path)
    assert replayed.adds == first[:-1] + second
    assert not replayed.result.lost_tail


async def test_rollover_starts_new_segments_and_replay_reads_them_in_order(tmp_path: Path) -> None:
    entries = [(7, i, random.Random(i).randbytes(1000)) for i in range(200)]
    await (await write(tmp_path, entries, max_segment_bytes=32 * KIB, prealloc_bytes=16 * KIB)).close()
    segments = list_segments(tmp_path)
    assert len(segments) >= 6
    for segment_id in segments[:-1]:
        assert os.path.getsize(segment_path(tmp_path, segment_id)) <= 48 * KIB
    replayed = replay(tmp_path)
    assert replayed.adds == entries
    segment_ids = [location.segment_id for location in replayed.locations]
    assert segment_ids == sorted(segment_ids) and sorted(set(segment_ids)) == segments[: len(set(segment_ids))]
    assert replayed.result.segments == len(segments)


async def test_restart_appends_to_the_last_segment_and_rolls_when_it_is_full(tmp_path: Path) -> None:
    await (await write(tmp_path, [(1, 0, b"a")])).close()
    await (await write(tmp_path, [(1, 1, b"b")])).close()
    assert len(list_segments(tmp_path)) == 1
    assert replay(tmp_path).adds == [(1, 0, b"a"), (1, 1, b"b")]


async def test_fence_records_replay(tmp_path: Path) -> None:
    journal = await started_journal(tmp_path)
    await add_durably(journal, 4, 0, b"e")
    await fence_durably(journal, 4)
    await fence_durably(journal, 9)
    await journal.close()
    assert [(r.type, r.ledger_id) for r, _, _ in replay(tmp_path).records] == [
        (RecordType.ADD_ENTRY, 4),
        (RecordType.FENCE, 4),
        (RecordType.FENCE, 9),
    ]


async def test_a_fence_completes_through_its_sink_in_queue_order_with_the_adds(tmp_path: Path) -> None:
    """Goal: a FENCE record completes through the same sink interface as adds, after the adds
    admitted before it and before those admitted after it, and is never held back by the
    queue's bound. Method: a queue of 2 records, two adds, a fence (past the bound), then an
    add that waits for room."""
    journal = await started_journal(tmp_path, queue_entries_max=2)
    order: list[str] = []

    class Named(RecordingSink):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def requests_done(self, requests: list, started: float, error: BaseException | None) -> None:
            order.append(self.name)
            super().requests_done(requests, started, error)

    before, fenced, after = Named("before"), Named("fence"), Named("after")
    assert submit(journal, before, Add(4, 0, b"a"), Add(4, 1, b"b"))
    assert not journal.has_room
    journal.add([Fence(4)], fenced, 0.0, RecordType.FENCE)
    await admit(journal, after, Add(4, 2, b"c"))  # waits for the room the first two give back
    await after.wait(1)
    await journal.close()
    assert order == ["before", "fence", "after"]
    assert [call.error for sink in (before, fenced, after) for call in sink.calls] == [None, None, None]
    assert [(r.type, r.entry_id) for r, _, _ in replay(tmp_path).records] == [
        (RecordType.ADD_ENTRY, 0),
        (RecordType.ADD_ENTRY, 1),
        (RecordType.FENCE, -1),
        (RecordType.ADD_ENTRY, 2),
    ]


async def test_a_full_queue_makes_producers_wait_and_drops_nothing(tmp_path: Path) -> None:
    """Goal: past journalQueueSize, adds wait for room (FIFO) instead of failing or being dropped."""
    journal = await started_journal(tmp_path, queue_entries_max=4, policy=GroupCommitPolicy(max_group_wait_s=0.005))
    sink = RecordingSink()
    assert all(submit(journal, sink, Add(1, i, b"q")) for i in range(4))
    assert not journal.has_room
    await asyncio.gather(*(admit(journal, sink, Add(1, i, b"q")) for i in range(4, 40)))
    await sink.wait(40)
    assert set(sink.errors()) == {None}
    await journal.close()
    assert sorted(e for _, e, _ in replay(tmp_path).adds) == list(range(40))


async def test_an_add_completes_only_after_its_group_is_synced(tmp_path: Path, monkeypatch) -> None:
    """Goal: no add is acknowledged before the fdatasync of its group returned.
    Method: hold the writer thread inside sync; the sink must not hear of the add until released."""
    import threading

    from minipulsar.bookie.journal import segment as journal_segment

    in_sync, release = threading.Event(), threading.Event()
    real_write = journal_segment.SegmentWriter.append_synced  # the group's write + fdatasync

    def held_sync(self, buffers, size=-1) -> int:
        in_sync.set()
        release.wait(10)
        return real_write(self, buffers, size)

    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", held_sync)
    journal = await started_journal(tmp_path)
    sink = RecordingSink()
    assert submit(journal, sink, Add(1, 0, b"durable?"))
    assert await asyncio.to_thread(in_sync.wait, 10)
    await asyncio.sleep(0.05)  # give a wrong implementation the chance to complete early
    assert sink.completed == 0
    release.set()
    await sink.wait(1)
    assert sink.errors() == [None]
    await journal.close()


@pytest.mark.expect_error_log(r"write failed, refusing further adds")
async def test_a_failed_write_fails_its_group_and_every_later_add(tmp_path: Path, monkeypatch) -> None:
    from minipulsar.bookie.journal import segment as journal_segment

    def failing_append(self, buffers, size=-1) -> int:
        raise OSError(28, "No space left on device")

    journal = await started_journal(tmp_path)
    await add_durably(journal, 1, 0, b"before")
    monkeypatch.setattr(journal_segment.SegmentWriter, "append", failing_append)
    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", failing_append)
    with pytest.raises(Exception, match="No space left"):
        await add_durably(journal, 1, 1, b"lost")
    monkeypatch.undo()
    with pytest.raises(Exception, match="No space left"):
        await add_durably(journal, 1, 2, b"refused")
    await journal.close()
    assert replay(tmp_path).adds == [(1, 0, b"before")]


@pytest.mark.expect_error_log(r"the writer thread failed")
@pytest.mark.parametrize("where", ["group timer", "flush decision", "batch split"])
async def test_a_failure_assembling_groups_fails_the_journal_and_answers_every_add(
    tmp_path: Path, monkeypatch, where: str
) -> None:
    """Goal: an unexpected error on the writer thread outside the write itself (a bug, such as
    an OverflowError in the group timer) fails the journal like a failed write: the adds being
    grouped and every later one are answered with the error, none waits forever, and the
    journal still closes. Method: the group timer, the policy's flush decision, or the split
    of a batch at a group boundary (the batch then in hand) raises."""
    from minipulsar.bookie.journal import writer_thread

    def broken_wait(self, group):
        if group:
            raise OverflowError("timeout value is too large")
        return self._queue.get()

    def broken_decision(self, *args):
        raise ValueError("a bug in the policy")

    journal = await started_journal(
        tmp_path, policy=GroupCommitPolicy(max_group_wait_s=1.0, adaptive_group_writes=where != "batch split")
    )
    if where == "group timer":
        monkeypatch.setattr(writer_thread.JournalThread, "_next_item", broken_wait)
    elif where == "flush decision":
        monkeypatch.setattr(GroupCommitPolicy, "should_flush", broken_decision)
    else:
        monkeypatch.setattr(writer_thread, "split_batch", broken_decision)
    with pytest.raises(Exception, match="journal writer failed"):
        await add_durably(journal, 1, 0, b"grouped")
    with pytest.raises(Exception, match="journal writer failed"):
        await add_durably(journal, 1, 1, b"refused")
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
    journal = await started_journal(
        tmp_path,
        policy=GroupCommitPolicy(max_group_wait_s=0, buffered_entries_threshold=4, adaptive_group_writes=adaptive),
    )
    sink = RecordingSink()
    assert submit(journal, sink, Add(1, 0, b"x"))
    assert await asyncio.to_thread(in_sync.wait, 10)
    assert all(submit(journal, sink, Add(1, i, b"x")) for i in range(1, 11))
    release.set()
    await sink.wait(11)
    assert journal.stats.group_sizes == ([1, 10] if adaptive else [1, 4, 4, 2])
    await journal.close()


async def test_applied_mark_moves_past_each_completed_group_and_replay_starts_there(tmp_path: Path) -> None:
    journal = await started_journal(tmp_path)
    await add_durably(journal, 1, 0, b"a" * 10)
    mark = journal.applied_mark
    await add_durably(journal, 1, 1, b"b" * 10)
    await journal.close()
    first = replay(tmp_path).locations[0]
    assert mark == LogMark(first.segment_id, first.offset + first.length)
    replayed = replay(tmp_path, mark)
    assert replayed.adds == [(1, 1, b"b" * 10)] and replayed.result.records == 1


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

    journal = await started_journal(tmp_path)
    await add_durably(journal, 1, 0, b"first")
    before = journal.applied_mark
    assert before is not None
    monkeypatch.setattr(journal_segment.SegmentWriter, "append_synced", sync_and_tell)
    sink = RecordingSink()
    assert submit(journal, sink, Add(1, 1, b"second"))
    await asyncio.sleep(0)  # the loop hands this iteration's records to the writer thread
    assert synced.wait(10)  # blocking the loop on purpose: the group's completion cannot run
    time.sleep(0.01)
    assert journal.applied_mark == before
    await sink.wait(1)
    assert journal.applied_mark is not None and journal.applied_mark > before
    await journal.close()


@pytest.mark.expect_error_log(r"closing the segments failed")
async def test_a_journal_whose_files_fail_to_close_still_stops(tmp_path: Path, monkeypatch) -> None:
    """Goal: close() returns even when closing the segments fails (EIO from a failing disk):
    the bookie's shutdown must not hang on it."""
    from minipulsar.bookie.journal import directory

    def failing_close(self) -> None:
        raise OSError(5, "Input/output error")

    journal = await started_journal(tmp_path)
    await add_durably(journal, 1, 0, b"written")
    monkeypatch.setattr(directory.JournalFiles, "close", failing_close)
    await asyncio.wait_for(journal.close(), 10)
