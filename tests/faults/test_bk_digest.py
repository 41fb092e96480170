"""End-to-end digests and master keys: corrupt replicas are never returned, and a writer
without a ledger's master key can neither write nor fence it.

Bookies and the metastore are real processes; the BookKeeper client runs in the test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from minipulsar import Client, InitialPosition
from minipulsar.bookie.storage.entry_log import (
    LOG_HEADER_SIZE,
    RECORD_HEADER,
    RECORD_HEADER_SIZE,
    encode_record_header,
)
from minipulsar.bookkeeper import metrics
from minipulsar.bookkeeper.digest import METADATA_LENGTH, DigestManager, generate_master_key
from minipulsar.errors import UnauthorizedAccessError
from minipulsar.protocol.commands import AddEntryResponse, Error, ReadEntry, ReadEntryResponse, ReadLac, ReadLacResponse
from tests.support.bk_cluster import bk_client, bookies_running
from tests.support.cluster import make_cluster
from tests.support.process import ServerProcess
from tests.support.raw_client import RawBookieClient
from tests.support.web import metrics_text, sample_value

NO_QUARANTINE = {"health_check_enabled": False}
"""Digest mismatches must not quarantine the corrupt bookie in these tests."""
CRC32C_HEADER = METADATA_LENGTH + 4
"""Bytes of a CRC32C-wrapped entry before its payload."""


def digest_mismatches() -> float:
    return REGISTRY.get_sample_value(metrics.PREFIX + "READ_ENTRY_DM") or 0.0


def marked_payload(entry_id: int) -> bytes:
    return f"<entry {entry_id:05d}>".encode() * 20


def corrupt_entry_log(ledger_dir: Path, ledger_id: int, entry_id: int, *, reseal: bool) -> None:
    """Flip a payload byte of the entry's record in the entry logs of ``ledger_dir``; with
    ``reseal``, rewrite the record's CRC over the flipped bytes too (the corruption happened
    before the bookie checksummed them: only the writer's digest can tell)."""
    marker = marked_payload(entry_id)
    for log_file in sorted((ledger_dir / "current").glob("*.log")):
        data = bytearray(log_file.read_bytes())
        at = data.find(marker)
        if at < 0:
            continue
        record = at - CRC32C_HEADER - RECORD_HEADER_SIZE
        length, _crc, stored_ledger, stored_entry = RECORD_HEADER.unpack_from(data, record)
        assert (stored_ledger, stored_entry) == (ledger_id, entry_id), "the marker is in another record"
        data[at + 3] ^= 0xFF
        if reseal:
            stored = bytes(data[record + RECORD_HEADER_SIZE : record + RECORD_HEADER_SIZE + length])
            data[record : record + RECORD_HEADER_SIZE] = encode_record_header(ledger_id, entry_id, stored)
        log_file.write_bytes(bytes(data))
        return
    raise AssertionError(f"entry {ledger_id}:{entry_id} is in no entry log of {ledger_dir}")


@pytest.mark.expect_error_log(r"checksum mismatch")
async def test_a_corrupt_replica_on_disk_is_never_returned_and_digest_mismatches_are_counted(tmp_path, metastore):
    """Goal: one replica's entries corrupted on disk never reach the caller; those the bookie's
    own CRC cannot catch are caught by the digest and counted (READ_ENTRY_DM).
    Method: E=3 Qw=2 Qa=2 (striped: entry e is read from ensemble[e % 3] first); write 30
    entries, close; stop ensemble[0]'s bookie (its write cache is flushed) and flip a payload
    byte of every entry it holds — for even entries in the record only (the bookie's CRC
    fails), for odd ones with the record's CRC rewritten over the flipped bytes; restart it
    on its port and read every entry with a fresh client."""
    async with (
        bookies_running(tmp_path, metastore, 3) as bookies,
        bk_client(metastore, **NO_QUARANTINE) as bk,
    ):
        handle = await bk.create_ledger(3, 2, 2)
        for entry_id in range(30):
            assert await handle.add(marked_payload(entry_id)) == entry_id
        await handle.close()
        victim_id = handle.metadata.ensemble_for(0)[0]
        index = next(i for i, b in enumerate(bookies) if b.address == victim_id)
        await asyncio.to_thread(bookies[index].stop)
        held = [e for e in range(30) if victim_id in handle.metadata.write_set(e)]
        ledger_dir = tmp_path / f"bookie-{index}" / "ledgers"
        for entry_id in held:
            corrupt_entry_log(ledger_dir, handle.ledger_id, entry_id, reseal=entry_id % 2 == 1)
        await asyncio.to_thread(bookies[index].start_on_same_port)

        async with bk_client(metastore, **NO_QUARANTINE) as reader:
            before = digest_mismatches()
            reopened = await reader.open_ledger(handle.ledger_id)
            entries = await reopened.read(0, 29)
        assert entries == [(e, marked_payload(e)) for e in range(30)], "only the right bytes come back"
        first_on_victim = [e for e in held if e % 3 == 0 and e % 2 == 1]
        assert first_on_victim, "some resealed entries are read from the corrupt replica first"
        assert digest_mismatches() - before == len(first_on_victim)


async def raw_bookie(process: ServerProcess) -> RawBookieClient:
    return await RawBookieClient.connected(process.host, process.port)


async def raw_read_one(client: RawBookieClient, ledger_id: int, entry_id: int) -> list[tuple[int, bytes]]:
    """The ``[entry_id, bytes]`` pairs a plain (non-fencing, keyless) READ_ENTRY of one entry answers."""
    response = await client.request(ReadEntry(id=client.next_id(), ledger_id=ledger_id, first_entry_id=entry_id))
    assert isinstance(response, ReadEntryResponse), response
    return [(e, bytes(p)) for e, p in response.entries]


async def test_wrongly_digested_bytes_a_bookie_stored_are_never_returned(tmp_path, metastore):
    """Goal: bytes that pass the bookie's own checks but not the writer's digest — here another
    payload under entry 0's header, stored by a raw add with the right master key — are
    caught by the reader, counted, and read from the other replica instead.
    Method: E=3 Qw=2 (entry 0 is read from ensemble[0] first); overwrite entry 0 there."""
    async with (
        bookies_running(tmp_path, metastore, 3) as bookies,
        bk_client(metastore, **NO_QUARANTINE) as bk,
    ):
        handle = await bk.create_ledger(3, 2, 2)
        for entry_id in range(3):
            await handle.add(marked_payload(entry_id))
        await handle.close()
        first = next(b for b in bookies if b.address == handle.metadata.ensemble_for(0)[0])
        good = DigestManager(handle.ledger_id).package(0, -1, len(marked_payload(0)), marked_payload(0))
        forged = good[:CRC32C_HEADER] + b"forged!" + good[CRC32C_HEADER + 7 :]
        client = await raw_bookie(first)
        try:
            add = client.add(handle.ledger_id, 0, forged, master_key=generate_master_key(b""))
            assert isinstance(await client.request(add), AddEntryResponse)
            assert await raw_read_one(client, handle.ledger_id, 0) == [(0, forged)], "the bookie serves it as stored"
        finally:
            client.close()
        async with bk_client(metastore, **NO_QUARANTINE) as reader:
            before = digest_mismatches()
            reopened = await reader.open_ledger(handle.ledger_id)
            assert await reopened.read(0, 2) == [(e, marked_payload(e)) for e in range(3)]
            assert digest_mismatches() - before == 1


async def test_a_writer_without_the_master_key_can_neither_write_nor_fence_across_restarts(tmp_path, metastore):
    """Goal: a ledger's master key is the first one a bookie saw (from an add or a fence); an
    ADD_ENTRY or a fencing READ_LAC / READ_ENTRY with another key is refused with
    UnauthorizedAccess, and nothing is fenced; plain reads need no key; the right key works;
    all of it holds after a SIGKILL (the key replayed from the journal) and after a clean
    restart (the key read from the ledger index).
    Method: raw-socket requests to one bookie process."""
    right, wrong = generate_master_key(b"secret"), generate_master_key(b"guess")
    async with bookies_running(tmp_path, metastore, 1) as (bookie,):
        for restart in (None, "kill", "stop"):
            if restart == "kill":
                await asyncio.to_thread(bookie.kill)
            elif restart == "stop":
                await asyncio.to_thread(bookie.stop)
            if restart is not None:
                await asyncio.to_thread(bookie.start_on_same_port)
            client = await raw_bookie(bookie)
            try:
                await check_master_key(client, right, wrong, first_use=restart is None)
            finally:
                client.close()

        client = await raw_bookie(bookie)
        try:  # a fence is a first use too: it sets the key of a ledger it creates
            fence = ReadLac(id=client.next_id(), ledger_id=8, fence=True, master_key=right)
            assert isinstance(await client.request(fence), ReadLacResponse)
            refused = await client.request(client.add(8, 0, b"x", recovery=True, master_key=wrong))
            assert isinstance(refused, Error) and refused.code == "UnauthorizedAccess", refused
            accepted = await client.request(client.add(8, 0, b"x", recovery=True, master_key=right))
            assert isinstance(accepted, AddEntryResponse), accepted
        finally:
            client.close()


async def check_master_key(client: RawBookieClient, right: bytes, wrong: bytes, *, first_use: bool) -> None:
    """Ledger 7 on a bookie: created with ``right`` by the first add (``first_use``), then
    every request of the test's goal."""
    if first_use:
        assert isinstance(await client.request(client.add(7, 0, b"zero", master_key=right)), AddEntryResponse)
    for refused in (
        client.add(7, 1, b"one", master_key=wrong),
        client.add(7, 1, b"one", recovery=True, master_key=wrong),
        ReadLac(id=client.next_id(), ledger_id=7, fence=True, master_key=wrong),
        ReadEntry(id=client.next_id(), ledger_id=7, first_entry_id=0, fence=True, master_key=wrong),
    ):
        answer = await client.request(refused)
        assert isinstance(answer, Error) and answer.code == "UnauthorizedAccess", (refused, answer)
        assert UnauthorizedAccessError.code.value == answer.code
    assert await raw_read_one(client, 7, 0) == [(0, b"zero")], "plain reads need no key"
    lac = await client.request(ReadLac(id=client.next_id(), ledger_id=7))
    assert isinstance(lac, ReadLacResponse), "nothing was fenced by the refused requests"
    entry_id = lac.last_entry_id + 1
    answer = await client.request(client.add(7, entry_id, b"more", master_key=right))
    assert isinstance(answer, AddEntryResponse), f"the right key writes: {answer}"


def reseal_every_record(ledger_dir: Path) -> int:
    """Flip the last payload byte of every record in the entry logs of ``ledger_dir`` and
    rewrite each record's CRC over the flipped bytes (what the bookie itself would store had
    the bytes been damaged before it checksummed them); returns how many were corrupted."""
    corrupted = 0
    for log_file in sorted((ledger_dir / "current").glob("*.log")):
        data = bytearray(log_file.read_bytes())
        offset = LOG_HEADER_SIZE
        while offset + RECORD_HEADER_SIZE <= len(data):
            length, _crc, ledger_id, entry_id = RECORD_HEADER.unpack_from(data, offset)
            end = offset + RECORD_HEADER_SIZE + length
            if length == 0 or end > len(data):
                break  # the unwritten (zero) tail
            data[end - 1] ^= 0xFF
            data[offset : offset + RECORD_HEADER_SIZE] = encode_record_header(
                ledger_id, entry_id, bytes(data[offset + RECORD_HEADER_SIZE : end])
            )
            corrupted += 1
            offset = end
        log_file.write_bytes(bytes(data))
    return corrupted


async def test_a_broker_serves_the_right_messages_from_a_cluster_with_one_corrupt_bookie(tmp_path: Path) -> None:
    """Goal: through the broker, every message reads back byte-identical although one bookie
    of every ensemble returns corrupt bytes that pass its own checks; the broker counts them.
    Method: 3 bookies, E=3 Qw=2 Qa=2; publish 60 messages; stop the broker (its caches go),
    then bookie-0; corrupt every record in bookie-0's entry logs (resealed); start both again
    and consume everything from a new subscription at Earliest."""
    quorums = {
        "managedLedgerDefaultEnsembleSize": 3,
        "managedLedgerDefaultWriteQuorum": 2,
        "managedLedgerDefaultAckQuorum": 2,
    }
    async with make_cluster(tmp_path, bookies=3, broker_settings=quorums) as cluster:
        sent = [f"message {i:03d} ".encode() * 8 for i in range(60)]
        async with Client(cluster.service_url) as client:
            producer = await client.create_producer("digested")
            for data in sent:
                await producer.send(data)
        await cluster.stop_broker(0)
        await asyncio.to_thread(cluster.bookies[0].stop)
        assert reseal_every_record(tmp_path / "bookie-0" / "ledgers") >= 20, "bookie-0 holds 2/3 of the entries"
        await asyncio.to_thread(cluster.bookies[0].start_on_same_port)
        await cluster.start_broker(0)
        async with Client(cluster.service_url) as client:
            consumer = await client.subscribe("digested", "after", initial_position=InitialPosition.Earliest)
            received = [(await consumer.receive(timeout_millis=30_000)).data() for _ in sent]
        assert received == sent
        text = await asyncio.to_thread(metrics_text, cluster.brokers[0])
        mismatches = sample_value(text, metrics.PREFIX + "READ_ENTRY_DM")
        assert mismatches is not None and mismatches >= 1, "the broker counted the corrupt copies it read around"
