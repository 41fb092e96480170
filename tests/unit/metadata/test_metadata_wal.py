"""Goal: the WAL and snapshots bring back exactly the acknowledged state, and replay stops
cleanly at a torn or corrupt record instead of failing or inventing data.

Method: write logs and snapshots with the real code into a tmp dir, damage the bytes (cut
the tail at every offset, flip a byte), then recover and compare with the expected tree."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from minipulsar.errors import PersistenceError
from minipulsar.metadata import recovery, snapshot, txn, wal
from minipulsar.metadata.durable import DurableTree
from minipulsar.metadata.tree import KeyTree


def write_log(path: Path, records: list[tuple[int, txn.Txn]]) -> list[int]:
    """Write a log file; returns the end offset of each record."""
    data, ends = bytearray(wal.MAGIC), []
    for txid, change in records:
        data += wal.encode_record(txid, change)
        ends.append(len(data))
    path.write_bytes(bytes(data))
    return ends


def puts(first_txid: int, count: int) -> list[tuple[int, txn.Txn]]:
    return [(t, txn.put(f"/k/{t}", b"v%d" % t, None, t)) for t in range(first_txid, first_txid + count)]


def log_path(tmp_path: Path, first_txid: int) -> Path:
    return tmp_path / snapshot.file_name(wal.PREFIX, first_txid)


def test_records_round_trip() -> None:
    records = puts(1, 3) + [(4, txn.session_create(9, 1000)), (5, txn.delete("/k/1")), (6, txn.session_close(9))]
    data = wal.MAGIC + b"".join(wal.encode_record(t, c) for t, c in records)
    contents = wal.decode_log(data)
    assert contents.records == records and contents.stop_reason is None
    assert contents.valid_bytes == len(data)


def test_a_torn_tail_at_any_byte_keeps_every_complete_record(tmp_path: Path) -> None:
    records = puts(1, 4)
    ends = write_log(tmp_path / "full", records)
    data = (tmp_path / "full").read_bytes()
    for cut in range(len(wal.MAGIC), len(data)):
        contents = wal.decode_log(data[:cut])
        complete = sum(end <= cut for end in ends)
        assert contents.records == records[:complete], cut
        assert (contents.stop_reason is None) == (cut in ends or cut == len(wal.MAGIC)), cut


def test_a_corrupt_crc_stops_replay_at_that_record() -> None:
    records = puts(1, 5)
    data = bytearray(wal.MAGIC)
    for txid, change in records:
        data += wal.encode_record(txid, change)
    third = len(wal.MAGIC) + sum(len(wal.encode_record(t, c)) for t, c in records[:2])
    data[third + 10] ^= 0xFF  # a byte inside the third record's body
    contents = wal.decode_log(bytes(data))
    assert contents.records == records[:2]
    assert "CRC mismatch" in contents.stop_reason


def test_recover_snapshot_plus_logs_with_torn_tail(tmp_path: Path) -> None:
    tree = KeyTree()
    for _txid, change in puts(1, 10):
        txn.apply(tree, change)
    snapshot.write(tmp_path, 10, snapshot.encode(tree, 10))
    write_log(log_path(tmp_path, 1), puts(1, 10))  # older log, covered by the snapshot
    ends = write_log(log_path(tmp_path, 11), puts(11, 5))
    with open(log_path(tmp_path, 11), "r+b") as f:
        f.truncate(ends[-1] - 3)  # the 15th record is torn
    state = recovery.recover(tmp_path, now_ms=0)
    assert state.txid == 14 and state.snapshot_txid == 10 and state.replayed == 4
    assert state.tree.children("/k") == sorted(str(t) for t in range(1, 15))
    assert len(state.problems) == 1 and "torn" in state.problems[0]


def test_recover_continues_into_the_next_log_after_a_torn_tail_but_stops_at_a_gap(tmp_path: Path) -> None:
    ends = write_log(log_path(tmp_path, 1), puts(1, 5))
    with open(log_path(tmp_path, 1), "r+b") as f:
        f.truncate(ends[2] + 2)  # records 1..3 good, 4 torn
    write_log(log_path(tmp_path, 4), puts(4, 3))  # the writer restarted at 4 after the tear
    write_log(log_path(tmp_path, 9), puts(9, 2))  # 7 and 8 missing: a gap
    state = recovery.recover(tmp_path, now_ms=0)
    assert state.txid == 6
    assert any("gap" in p for p in state.problems)


@pytest.mark.expect_error_log(r"is unreadable")
def test_an_unreadable_snapshot_refuses_the_start(tmp_path: Path) -> None:
    data = bytearray(snapshot.encode(KeyTree(), 3))
    data[-1] ^= 0xFF
    (tmp_path / snapshot.file_name(snapshot.PREFIX, 3)).write_bytes(bytes(data))
    with pytest.raises(PersistenceError):
        recovery.recover(tmp_path, now_ms=0)


def test_sessions_are_restored_with_a_fresh_deadline(tmp_path: Path) -> None:
    write_log(log_path(tmp_path, 1), [(1, txn.session_create(7, 2000)), (2, txn.put("/e", b"", 7, 1))])
    state = recovery.recover(tmp_path, now_ms=50_000)
    assert state.tree.session(7).deadline_ms == 52_000
    assert state.tree.get("/e").owner == 7


async def test_log_writer_commits_everything_queued_in_one_group(tmp_path: Path) -> None:
    synced: list[int] = []
    done = asyncio.Event()

    def on_synced(txid: int) -> None:
        synced.append(txid)
        if txid == 100:
            done.set()

    writer = wal.LogWriter(tmp_path, asyncio.get_running_loop(), on_synced=on_synced, on_failed=print)
    for txid, change in puts(1, 100):
        writer.append(txid, wal.encode_record(txid, change))  # all queued before the thread starts
    await asyncio.to_thread(writer.open, 0, snapshot.encode(KeyTree(), 0))
    await asyncio.wait_for(done.wait(), 10)
    await asyncio.to_thread(writer.close)
    assert synced == [100] and writer.groups == 1 and writer.records == 100
    assert len(wal.read_log(log_path(tmp_path, 1)).records) == 100


async def test_durable_tree_snapshots_every_snap_count_and_restores(tmp_path: Path) -> None:
    state = DurableTree(KeyTree(), 0, tmp_path, snapshot_every_txns=7)
    await state.open()
    sid = state.create_session(1000, now_ms=0)
    for i in range(30):
        state.put(f"/n/{i}", b"%d" % i, None, sid if i % 10 == 0 else None, i)
    state.delete("/n/5", None)
    answered = asyncio.Event()
    state.when_durable(lambda error: answered.set())
    await asyncio.wait_for(answered.wait(), 10)
    await state.close()
    assert state.writer.snapshots == 1 + 32 // 7  # the opening checkpoint + one per 7 changes
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != ".lock")
    assert names == [snapshot.file_name(wal.PREFIX, 29), snapshot.file_name(snapshot.PREFIX, 28)]
    restored = recovery.recover(tmp_path, now_ms=0)
    assert restored.txid == 32 and restored.tree.export() == state.tree.export()
