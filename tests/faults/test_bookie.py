"""A real bookie process beside a real metastore process: durability across SIGKILL, a clean
SIGTERM that answers what it accepted, and the registration's life cycle."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from minipulsar.errors import ConnectionClosedError
from minipulsar.metadata import open_metadata_store
from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, ReadEntry
from tests.support.entries import payload_of_varied_size
from tests.support.process import ServerProcess, started
from tests.support.raw_client import RawClient
from tests.support.servers import bookie_process

SESSION_TIMEOUT_MS = 2000


JOURNALS, LEDGER_DIRS = ("journal-a", "journal-b"), ("ledgers-a", "ledgers-b")
PAYLOAD_SIZES = (0, 10, 1000, 5000, 70_000)


def two_journal_bookie(root: Path, metadata_url: str, port: int = 0, name: str = "bookie") -> ServerProcess:
    """A bookie with two journals and two ledger dirs."""
    settings = {"zkTimeout": SESSION_TIMEOUT_MS}
    return bookie_process(
        root, metadata_url, port=port, journals=JOURNALS, ledgers=LEDGER_DIRS, settings=settings, name=name
    )


def varied_payload(ledger_id: int, entry_id: int) -> bytes:
    return payload_of_varied_size(ledger_id, entry_id, PAYLOAD_SIZES)


async def test_acknowledged_entries_survive_sigkill(tmp_path: Path, metastore: ServerProcess) -> None:
    """Goal: every acknowledged add reads back byte-identical after a SIGKILL and restart.
    Method: pipeline 1000 adds over 4 ledgers (two journals), wait for all acks, SIGKILL,
    restart on the same port and dirs, read every entry back in ranges."""
    url = f"metastore://{metastore.address}"
    first = two_journal_bookie(tmp_path, url)
    async with started(first):
        conn = await connect(RawClient, first.host, first.port)
        requests = [
            conn.request(
                AddEntry,
                ledger_id=entry % 4,
                entry_id=entry // 4,
                payload=varied_payload(entry % 4, entry // 4),
                lac=entry // 4 - 1,
            )
            for entry in range(1000)
        ]
        acks = await asyncio.gather(*requests)
        assert len(acks) == 1000
        first.kill()
        conn.abort()
        second = two_journal_bookie(tmp_path, url, port=first.port, name="bookie-restarted")
        async with started(second):
            conn = await connect(RawClient, second.host, second.port)
            for ledger_id in range(4):
                got: list[tuple[int, bytes]] = []
                while len(got) < 250:
                    response = await conn.request(ReadEntry, ledger_id=ledger_id, first_entry_id=len(got), count=250)
                    got.extend((e, p) for e, p in response.entries)
                assert [e for e, _ in got] == list(range(250))
                assert all(p == varied_payload(ledger_id, e) for e, p in got), f"ledger {ledger_id} differs"
            conn.close()


async def test_sigterm_answers_every_add_it_accepted(tmp_path: Path, metastore: ServerProcess) -> None:
    """Goal: a clean stop acknowledges the adds already accepted, and those are durable.
    Method: pipeline 300 adds, SIGTERM at once; every add is acked or fails with a closed
    connection, and every acked one reads back after a restart."""
    url = f"metastore://{metastore.address}"
    first = two_journal_bookie(tmp_path, url)
    async with started(first):
        conn = await connect(RawClient, first.host, first.port)
        requests = [conn.request(AddEntry, ledger_id=1, entry_id=i, payload=varied_payload(1, i)) for i in range(300)]
        await asyncio.sleep(0)  # the adds are on the wire
        first.proc.terminate()
        results = await asyncio.gather(*requests, return_exceptions=True)
        assert await asyncio.to_thread(first.proc.wait, 10) == 0
        acked = [r.entry_id for r in results if not isinstance(r, BaseException)]
        assert all(isinstance(r, ConnectionClosedError) for r in results if isinstance(r, BaseException))
    second = two_journal_bookie(tmp_path, url, port=first.port, name="bookie-restarted")
    async with started(second):
        conn = await connect(RawClient, second.host, second.port)
        for entry_id in acked:
            response = await conn.request(ReadEntry, ledger_id=1, first_entry_id=entry_id)
            assert response.entries == [[entry_id, varied_payload(1, entry_id)]]
        conn.close()


async def test_registration_appears_and_goes_away_on_a_clean_stop(tmp_path: Path, metastore: ServerProcess) -> None:
    url = f"metastore://{metastore.address}"
    observer = await open_metadata_store(url, session_timeout_ms=SESSION_TIMEOUT_MS)
    bookie = two_journal_bookie(tmp_path, url)
    try:
        async with started(bookie):
            assert bookie.address in await observer.children("/ledgers/available")
            info = json.loads((await observer.get(f"/ledgers/available/{bookie.address}")).value)
            assert info["httpPort"] == bookie.http_port and len(info["journalDirs"]) == 2
            assert len(info["ledgerDirs"]) == 2 and info["rack"] == "/default-rack"
        assert bookie.proc.returncode == 0
        assert bookie.address not in await observer.children("/ledgers/available")
    finally:
        await observer.close()


async def test_a_restart_after_sigkill_waits_out_the_old_registration(tmp_path: Path, metastore: ServerProcess) -> None:
    """Goal: after a SIGKILL the stale ephemeral key expires and the restarted bookie registers
    again under the same id (instead of failing, or being unregistered by the old session)."""
    url = f"metastore://{metastore.address}"
    observer = await open_metadata_store(url, session_timeout_ms=SESSION_TIMEOUT_MS)
    first = two_journal_bookie(tmp_path, url)
    try:
        async with started(first):
            first.kill()
        killed_ms = time.time() * 1000
        second = two_journal_bookie(tmp_path, url, port=first.port, name="bookie-restarted")
        async with started(second):
            got = await observer.get(f"/ledgers/available/{second.address}")
            assert got is not None and got.stat.ephemeral
            assert got.stat.created_ms >= killed_ms - 50, "the key is still the killed bookie's"
    finally:
        await observer.close()


@pytest.mark.expect_error_log(r"bookie cannot start")
@pytest.mark.parametrize("flag", ["--ledger-dirs", "--journal-dir"])
async def test_directories_of_another_bookie_are_refused(tmp_path: Path, metastore: ServerProcess, flag: str) -> None:
    url = f"metastore://{metastore.address}"
    async with started(two_journal_bookie(tmp_path / "one", url, name="one")):
        pass
    other = two_journal_bookie(tmp_path / "two", url, name="two")
    args = other.args
    index = args.index(flag) + 1
    args[index] = str(tmp_path / "one" / ("ledgers-a" if flag == "--ledger-dirs" else "journal-a"))
    if flag == "--journal-dir":
        args[index + 2] = str(tmp_path / "one" / "journal-b")
    with pytest.raises(RuntimeError, match="exited with 2"):
        await asyncio.to_thread(other.start)
    assert "cookie" in other.log_tail().lower()
