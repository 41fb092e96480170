"""The adds of one socket read admitted together (``BookieServerConnection.commands_received``,
``BookieImpl.try_add``, ``Journal.add``, ``add_entries``/``put_run``): fenced and
recovery adds in a mixed read, ledgers on two journals, request order against the other
commands of the read, duplicate (ledger, entry) pairs, and back-pressure with a tiny write
cache or journal queue.

An in-process bookie on 127.0.0.1:0 (memory:// metadata) is driven by raw frames. A batch is
sent in ONE write and delivered to the bookie in ONE read: its connection stops reading until
every byte of the batch is in its socket (FIONREAD), then reads once; a spy on
``BookieImpl.try_add`` checks that the whole batch did come as one read.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import fcntl
import termios
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from minipulsar.bookie import metrics as bookie_metrics
from minipulsar.bookie.bookie_server import BookieServer
from minipulsar.bookie.journal.format import RecordType
from minipulsar.bookie.server_connection import BookieServerConnection
from minipulsar.bookie.storage import metrics as storage_metrics
from minipulsar.bookie.storage.single_directory import SingleDirectoryDbLedgerStorage
from minipulsar.bookie.storage.write_cache import WriteCache
from minipulsar.config import BookieConfig
from minipulsar.protocol.codec import encode_bytes
from minipulsar.protocol.commands import (
    AddEntry,
    Error,
    ReadEntry,
    ReadEntryResponse,
    ReadLac,
    ReadLacResponse,
)
from minipulsar.protocol.schema import Command
from tests.support.bookie_service import running_service, service_config
from tests.support.bookie_storage import open_single_directory
from tests.support.entries import entry_payload
from tests.support.process import wait_for
from tests.support.raw_client import RawBookieClient, is_ack

ONE_READ_BYTES_MAX = 12 * 1024
"""A batch meant for one read stays below the decoder's smallest read (16 KiB)."""


# -- an in-process bookie and a raw connection to it -------------------------------------------


def admission_config(root: Path, **overrides: Any) -> BookieConfig:
    """An in-process bookie that commits each journal group at once (no group wait)."""
    return service_config(root, **{"journalMaxGroupWaitMSec": 0, **overrides})


def _unread_bytes(fd: int) -> int:
    """Bytes waiting in a socket's receive queue."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


class InProcessBookieClient(RawBookieClient):
    """A raw client that knows the bookie's side of its connection (the bookie runs in this process)."""

    server: BookieServerConnection

    @classmethod
    async def open_in_process(cls, service: BookieServer) -> InProcessBookieClient:
        before = set(service.listener.connections)
        client = await cls.connected(service.host, service.port)
        (server,) = set(service.listener.connections) - before
        assert isinstance(server, BookieServerConnection)
        client.server = server
        return client

    async def send_in_one_read(self, commands: list[Command]) -> None:
        """One write of every frame, which the bookie then takes in one read."""
        data = b"".join(map(encode_bytes, commands))
        assert len(data) <= ONE_READ_BYTES_MAX, "too big to be sure of one read"
        transport = self.server.transport
        assert transport is not None
        fd = transport.get_extra_info("socket").fileno()
        transport.pause_reading()
        try:
            await self.send(data)
            await wait_for(lambda: _unread_bytes(fd) >= len(data), 5, 0.001, "the batch never reached the bookie")
        finally:
            transport.resume_reading()


@contextlib.asynccontextmanager
async def client_of(service: BookieServer) -> AsyncIterator[InProcessBookieClient]:
    client = await InProcessBookieClient.open_in_process(service)
    try:
        yield client
    finally:
        client.close()


class Spy:
    """Records the calls of one method of one object (and what they returned), then calls it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
        self.calls: list[tuple[tuple, Any]] = []
        original: Callable = getattr(owner, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.calls.append((args, result))
            return result

        monkeypatch.setattr(owner, name, spy)


def is_error(response: Command, code: str) -> bool:
    return isinstance(response, Error) and response.code == code


async def fence_ledger(client: RawBookieClient, ledger_id: int) -> ReadLacResponse:
    response = await client.request(ReadLac(id=client.next_id(), ledger_id=ledger_id, fence=True))
    assert isinstance(response, ReadLacResponse), response
    return response


def add_hand_overs(spy: Spy) -> list[tuple[tuple, Any]]:
    """The calls of a ``Journal.add`` spy that handed over adds (not LEDGER_KEY or FENCE records)."""
    return [(args, result) for args, result in spy.calls if len(args) < 4 or args[3] is RecordType.ADD_ENTRY]


def reserved_bytes(service: BookieServer) -> int:
    """Write-cache room reserved for adds not yet in the cache: 0 once every add is answered."""
    return sum(directory._reserved for directory in service.bookie.storage.dirs)


# -- one read, several ledgers -------------------------------------------------------------------


async def test_one_read_of_adds_for_several_ledgers_is_admitted_and_answered_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: the adds of one read for ledgers of one journal go through one ``try_add``, one
    journal admission (``Journal.add``), one ``add_entries`` into the storage and one
    ``requests_done``; every request id is acknowledged and reads back."""
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        bookie = service.bookie
        (journal,) = bookie.journals.journals
        admitted, handed_over = Spy(monkeypatch, bookie, "try_add"), Spy(monkeypatch, journal, "add")
        stored = Spy(monkeypatch, bookie.storage, "add_entries")
        answered = Spy(monkeypatch, client.server, "requests_done")
        adds = [
            client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id))
            for entry_id in range(6)
            for ledger_id in (5, 6, 7)
        ]
        await client.send_in_one_read(adds)
        answers = await client.answers(adds)
        assert all(is_ack(answers[add.id], add) for add in adds), answers
        assert [(len(args[0]), result) for args, result in admitted.calls] == [(len(adds), len(adds))]
        assert [args[0] for args, _ in add_hand_overs(handed_over)] == [adds], (
            "admitted together: one journal hand-over of the whole read"
        )
        assert [args[0] for args, _ in stored.calls] == [adds], "one add_entries call for the run"
        assert [(args[0], args[2]) for args, _ in answered.calls] == [(adds, None)], "one requests_done for the run"
        for ledger_id in (5, 6, 7):
            assert await client.read_all(ledger_id, 6) == [(e, entry_payload(ledger_id, e)) for e in range(6)]
        assert reserved_bytes(service) == 0


async def test_a_fenced_ledger_in_one_read_refuses_only_its_own_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: in one read carrying adds for several ledgers, one of them fenced, the fenced
    ledger's adds get LedgerFenced and the others are acknowledged; every request id is
    answered exactly once, and no write-cache room stays reserved."""
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        await fence_ledger(client, 9)
        admitted = Spy(monkeypatch, service.bookie, "try_add")
        adds = [
            client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id))
            for entry_id in range(4)
            for ledger_id in (8, 9, 10)
        ]
        in_progress_before = bookie_metrics.TOTALS.adds_in_progress
        client.received.clear()
        await client.send_in_one_read(adds)
        answers = await client.answers(adds)
        assert [len(args[0]) for args, _ in admitted.calls] == [len(adds)], "the whole batch came in one read"
        for add in adds:
            if add.ledger_id == 9:
                assert is_error(answers[add.id], "LedgerFenced"), answers[add.id]
            else:
                assert is_ack(answers[add.id], add), answers[add.id]
        assert len(client.received) == len(adds), "one answer per request"
        for ledger_id in (8, 10):
            assert await client.read_all(ledger_id, 4) == [(e, entry_payload(ledger_id, e)) for e in range(4)]
        missing = await client.request(ReadEntry(id=client.next_id(), ledger_id=9, first_entry_id=0))
        assert is_error(missing, "NoSuchEntry"), missing
        assert reserved_bytes(service) == 0
        assert bookie_metrics.TOTALS.adds_in_progress == in_progress_before


async def test_recovery_adds_pass_a_fenced_ledger_in_the_same_read_as_refused_normal_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: on a fenced ledger, the recovery adds of a read are acknowledged and stored while
    the normal adds of the same read (same entry ids, other bytes) are refused; adds of an
    unfenced ledger in that read are acknowledged too."""
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        await fence_ledger(client, 21)
        admitted = Spy(monkeypatch, service.bookie, "try_add")
        adds: list[AddEntry] = []
        for entry_id in range(4):
            adds.append(client.add(21, entry_id, entry_payload(21, entry_id, "recovered"), recovery=True))
            adds.append(client.add(21, entry_id, entry_payload(21, entry_id, "writer")))
            adds.append(client.add(22, entry_id, entry_payload(22, entry_id)))
        await client.send_in_one_read(adds)
        answers = await client.answers(adds)
        assert [len(args[0]) for args, _ in admitted.calls] == [len(adds)], "the whole batch came in one read"
        for add in adds:
            if add.ledger_id == 21 and not add.recovery:
                assert is_error(answers[add.id], "LedgerFenced"), answers[add.id]
            else:
                assert is_ack(answers[add.id], add), answers[add.id]
        assert await client.read_all(21, 4) == [(e, entry_payload(21, e, "recovered")) for e in range(4)]
        assert await client.read_all(22, 4) == [(e, entry_payload(22, e)) for e in range(4)]
        lac = await client.request(ReadLac(id=client.next_id(), ledger_id=21))
        assert (lac.lac, lac.last_entry_id) == (2, 3)
        assert reserved_bytes(service) == 0


async def test_a_read_of_only_recovery_adds_on_a_fenced_ledger_is_acknowledged(tmp_path: Path) -> None:
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        await fence_ledger(client, 31)
        adds = [client.add(31, entry_id, entry_payload(31, entry_id), recovery=True) for entry_id in range(8)]
        await client.send_in_one_read(adds)
        answers = await client.answers(adds)
        assert all(is_ack(answers[add.id], add) for add in adds), answers
        assert await client.read_all(31, 8) == [(e, entry_payload(31, e)) for e in range(8)]


# -- two journals ------------------------------------------------------------------------------


async def test_one_read_for_ledgers_on_two_journals_is_durable_and_reads_back_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a read mixing ledgers of two journals is admitted one by one (no single journal
    for the lot), a read of one journal's ledgers together; both are acknowledged in full and
    read back after a restart (the journals are replayed into the storage)."""
    config = admission_config(
        tmp_path,
        journalDirectories=f"{tmp_path / 'journal-a'},{tmp_path / 'journal-b'}",
        ledgerDirectories=f"{tmp_path / 'ledgers-a'},{tmp_path / 'ledgers-b'}",
        flushInterval=3_600_000,
    )  # nothing checkpointed: the restart replays both journals
    ledgers = (40, 41, 42, 43)  # journals 0, 1, 0, 1
    async with running_service(config) as service, client_of(service) as client:
        journals = service.bookie.journals.journals
        assert len(journals) == 2
        handed_over = [Spy(monkeypatch, journal, "add") for journal in journals]
        mixed = [
            client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id))
            for entry_id in range(5)
            for ledger_id in ledgers
        ]
        await client.send_in_one_read(mixed)
        answers = await client.answers(mixed)
        assert all(is_ack(answers[add.id], add) for add in mixed), answers
        assert [len(args[0]) for spy in handed_over for args, _ in add_hand_overs(spy)] == [1] * len(mixed), (
            "ledgers of two journals: one by one"
        )
        for spy in handed_over:
            spy.calls.clear()
        odd = [
            client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id))
            for entry_id in range(5, 10)
            for ledger_id in (41, 43)
        ]
        await client.send_in_one_read(odd)
        answers = await client.answers(odd)
        assert all(is_ack(answers[add.id], add) for add in odd), answers
        assert not handed_over[0].calls and [len(args[0]) for args, _ in handed_over[1].calls] == [len(odd)]
    async with running_service(config) as service, client_of(service) as client:
        for ledger_id in ledgers:
            count = 10 if ledger_id in (41, 43) else 5
            assert await client.read_all(ledger_id, count) == [(e, entry_payload(ledger_id, e)) for e in range(count)]


# -- request order: the adds before any other command ---------------------------------------


@pytest.mark.parametrize("fencing_read", ["READ_LAC", "READ_ENTRY"])
async def test_a_fencing_read_behind_adds_in_the_same_read_sees_them(tmp_path: Path, fencing_read: str) -> None:
    """Goal: the adds received before another command of the same read are admitted before it
    runs: a fencing READ_LAC / READ_ENTRY sent right after adds in one write sees every one of
    them (all acknowledged, none LedgerFenced), and the adds sent after it are refused."""
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        before = [client.add(50, entry_id, entry_payload(50, entry_id)) for entry_id in range(5)]
        if fencing_read == "READ_LAC":
            read: Command = ReadLac(id=client.next_id(), ledger_id=50, fence=True)
        else:
            read = ReadEntry(id=client.next_id(), ledger_id=50, first_entry_id=0, count=100, fence=True)
        after = [client.add(50, entry_id, entry_payload(50, entry_id)) for entry_id in range(5, 7)]
        await client.send_in_one_read([*before, read, *after])
        answers = await client.answers([*before, read, *after])
        assert all(is_ack(answers[add.id], add) for add in before), answers
        assert all(is_error(answers[add.id], "LedgerFenced") for add in after), answers
        response = answers[read.id]  # type: ignore[attr-defined]
        if fencing_read == "READ_LAC":
            assert isinstance(response, ReadLacResponse) and (response.lac, response.last_entry_id) == (3, 4), response
        else:
            assert isinstance(response, ReadEntryResponse), response
            assert [(e, p) for e, p in response.entries] == [(e, entry_payload(50, e)) for e in range(5)]
        assert reserved_bytes(service) == 0


async def test_an_invalid_add_in_a_read_is_refused_alone(tmp_path: Path) -> None:
    """An add with an out-of-range id is answered InvalidCommand; the valid adds around it in
    the same read are admitted together and acknowledged."""
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        adds = [client.add(60, entry_id, entry_payload(60, entry_id)) for entry_id in range(3)]
        bad = AddEntry(id=client.next_id(), ledger_id=60, entry_id=2**63, payload=b"x")
        tail = [client.add(60, entry_id, entry_payload(60, entry_id)) for entry_id in range(3, 5)]
        await client.send_in_one_read([*adds, bad, *tail])
        answers = await client.answers([*adds, bad, *tail])
        assert is_error(answers[bad.id], "InvalidCommand"), answers[bad.id]
        assert all(is_ack(answers[add.id], add) for add in [*adds, *tail]), answers
        assert await client.read_all(60, 5) == [(e, entry_payload(60, e)) for e in range(5)]
        assert reserved_bytes(service) == 0


# -- duplicate (ledger, entry) pairs: the last one wins, as one by one --------------------------
#
# BookKeeper's WriteCache.put overwrites the index slot of a (ledger, entry) already cached, and
# the journal replays records in order: a re-added entry reads back as the LAST add. A run
# inserted in one call must end exactly as the same adds put one by one.

RUNS = {
    "a pair twice in one run, new ledger": ([], [(0, b"a" * 10), (1, b"b" * 20), (0, b"c" * 30), (2, b"d")]),
    "a pair three times": ([], [(7, b"1"), (7, b"22"), (7, b"333")]),
    "a run over cached entries": ([(0, b"old" * 9), (1, b"x")], [(1, b"new" * 5), (2, b"y" * 7)]),
    "a run over cached entries and twice in itself": ([(3, b"z" * 50)], [(3, b"q"), (4, b"w" * 8), (4, b"e" * 2)]),
}


@pytest.mark.parametrize("cached,run", RUNS.values(), ids=list(RUNS))
def test_a_write_cache_run_with_duplicates_ends_as_one_by_one_puts(cached: list, run: list) -> None:
    one_by_one, together = WriteCache(), WriteCache()
    for cache in (one_by_one, together):
        cache.put(99, 100, b"other entry")
        for entry_id, data in cached:
            cache.put(5, entry_id, data)
    for entry_id, data in run:
        one_by_one.put(5, entry_id, data)
    together.put_run(5, [entry_id for entry_id, _ in run], [data for _, data in run])
    assert list(together.sorted_entries()) == list(one_by_one.sorted_entries())
    assert (together.count, together.size_bytes) == (one_by_one.count, one_by_one.size_bytes)
    last = dict(run)
    assert all(together.get(5, entry_id) == data for entry_id, data in last.items()), "the last add wins"


class _Add:
    """What the journal hands the storage: anything with these four fields."""

    def __init__(self, ledger_id: int, entry_id: int, lac: int, payload: bytes) -> None:
        self.ledger_id, self.entry_id, self.lac, self.payload = ledger_id, entry_id, lac, payload


def _state(directory: SingleDirectoryDbLedgerStorage) -> tuple:
    """Not through reads: a read fills the read cache ahead from the entry log, where a re-added
    entry's superseded copy may follow the entry read (BookKeeper reads ahead the same way; a
    re-add there writes the same bytes)."""
    ledger = directory.ledger(5)
    return (
        list(directory._active.sorted_entries()),
        ledger.last_entry_id,
        ledger.lac,
        directory._active.count,
        directory._active.size_bytes,
        directory._reserved,
    )


def _flush(directory: SingleDirectoryDbLedgerStorage) -> None:
    batch = directory.swap()
    directory.flush(batch)
    directory.flush_completed(batch)


def test_a_storage_run_with_duplicates_ends_as_one_by_one_adds_and_flushes_the_last(tmp_path: Path) -> None:
    """Goal: ``add_entries`` with a (ledger, entry) twice in the run — and again after a flush —
    leaves what ``add_entry`` one by one leaves (entries, LAC, cache size, no room reserved),
    and the flushed entry log and index hold the last payload."""
    runs = [
        [_Add(5, 0, -1, b"first"), _Add(5, 1, 0, b"one"), _Add(5, 0, 0, b"second" * 3), _Add(5, 2, 1, b"two")],
        [_Add(5, 2, 1, b"two again" * 4), _Add(5, 3, 2, b"three")],
    ]
    one_by_one, together = open_single_directory(tmp_path / "one-by-one"), open_single_directory(tmp_path / "together")
    try:
        for run in runs:
            for add in run:
                assert one_by_one.try_admit(len(add.payload))
                one_by_one.add_entry(add.ledger_id, add.entry_id, add.lac, add.payload)
            assert together.try_admit_all(sum(len(add.payload) for add in run), len(run))
            together.add_entries(run)
            assert _state(together) == _state(one_by_one)
            assert together._reserved == 0
            _flush(one_by_one)
            _flush(together)
            assert _state(together) == _state(one_by_one)
        expected = [(0, b"second" * 3), (1, b"one"), (2, b"two again" * 4), (3, b"three")]
        # Entry by entry from the last: reading an earlier entry first would read ahead the
        # superseded copy of entry 2 that follows entry 1 in the entry log (see _state).
        for directory in (together, one_by_one):
            assert [directory.read_entries(5, e, 1, 1 << 20)[0] for e in (3, 2, 1, 0)] == expected[::-1]
        assert together.entry_count == one_by_one.entry_count == 4
    finally:
        one_by_one.close()
        together.close()


async def test_a_pair_twice_in_one_read_is_acknowledged_twice_and_the_last_payload_wins(tmp_path: Path) -> None:
    async with running_service(admission_config(tmp_path)) as service, client_of(service) as client:
        adds = [
            client.add(70, 0, b"first"),
            client.add(70, 1, b"one"),
            client.add(70, 0, b"second"),
            client.add(70, 2, b"two"),
        ]  # one ledger: one run, put into the write cache with one put_run
        await client.send_in_one_read(adds)
        answers = await client.answers(adds)
        assert all(is_ack(answers[add.id], add) for add in adds), answers
        assert await client.read_all(70, 3) == [(0, b"second"), (1, b"one"), (2, b"two")]
        assert reserved_bytes(service) == 0


# -- back-pressure -------------------------------------------------------------------------------

TIGHT = {
    "tiny write cache": {"dbStorage_writeCacheMaxSizeMb": 1},  # 512 KiB halves
    "tiny journal queue": {"journalQueueSize": 16, "journalMaxMemorySizeMb": 1},
}


@pytest.mark.parametrize("limits", TIGHT.values(), ids=list(TIGHT))
async def test_a_burst_larger_than_the_bound_is_acknowledged_in_order_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: dict
) -> None:
    """Goal: adds that find no room wait, in order, while the connection stops reading; every
    add of a burst ~3x the write cache (or ~20x the journal queue) is acknowledged in request
    order and reads back, and no room stays reserved.
    Method: one write of 360 adds of 8 KiB over 3 ledgers; a spy shows adds waited."""
    async with running_service(admission_config(tmp_path, **limits)) as service, client_of(service) as client:
        waited = Spy(monkeypatch, service.bookie, "add_when_admitted")
        throttled_before = storage_metrics.THROTTLED_WRITE_REQUESTS._value.get()
        in_progress_before = bookie_metrics.TOTALS.adds_in_progress
        adds = [
            client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id, size=8192))
            for entry_id in range(120)
            for ledger_id in (80, 81, 82)
        ]
        answering = asyncio.ensure_future(client.answers(adds))  # read while writing: no deadlock
        await client.send(adds)
        answers = await answering
        assert all(is_ack(answers[add.id], add) for add in adds), [
            answers[add.id] for add in adds if not is_ack(answers[add.id], add)
        ][:3]
        assert [response.id for response in client.received] == [add.id for add in adds], (
            "one journal: acknowledged in request order"
        )
        assert waited.calls, "the burst never waited for room: nothing was tested"
        if "dbStorage_writeCacheMaxSizeMb" in limits:
            assert storage_metrics.THROTTLED_WRITE_REQUESTS._value.get() > throttled_before
        for ledger_id in (80, 81, 82):
            assert await client.read_all(ledger_id, 120) == [
                (e, entry_payload(ledger_id, e, size=8192)) for e in range(120)
            ]
        assert reserved_bytes(service) == 0
        assert bookie_metrics.TOTALS.adds_in_progress == in_progress_before


async def test_a_fencing_read_behind_adds_waiting_for_room_acknowledges_none_past_the_fence(tmp_path: Path) -> None:
    """Goal: with adds waiting for write-cache room, a fencing READ_LAC written right behind
    them answers a last entry such that every acknowledged add is at or below it, every
    other add is LedgerFenced, and all entries up to it read back (no acknowledged add lost)."""
    async with (
        running_service(admission_config(tmp_path, dbStorage_writeCacheMaxSizeMb=1)) as service,
        client_of(service) as client,
    ):
        adds = [client.add(90, entry_id, entry_payload(90, entry_id, size=8192)) for entry_id in range(200)]
        read = ReadLac(id=client.next_id(), ledger_id=90, fence=True)
        answering = asyncio.ensure_future(client.answers([*adds, read]))
        await client.send([*adds, read])
        answers = await answering
        fenced = answers[read.id]
        assert isinstance(fenced, ReadLacResponse), fenced
        acked = [add.entry_id for add in adds if is_ack(answers[add.id], add)]
        refused = [add.entry_id for add in adds if is_error(answers[add.id], "LedgerFenced")]
        assert sorted(acked + refused) == list(range(200)), "every add acknowledged or LedgerFenced"
        assert acked == list(range(fenced.last_entry_id + 1)), (fenced, refused[:3])
        assert await client.read_all(90, len(acked)) == [(e, entry_payload(90, e, size=8192)) for e in acked]
        assert reserved_bytes(service) == 0
