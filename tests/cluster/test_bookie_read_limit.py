"""Goal: ``maxReadsInProgressLimit`` bounds the reads a bookie has in progress by blocking the
reads past it, never refusing them: every read is served, and the blocked ones are counted
(``bookkeeper_server_READ_ENTRY_BLOCKED``) with their wait
(``bookkeeper_server_READ_ENTRY_BLOCKED_WAIT``).

Method: a bookie process with maxReadsInProgressLimit=1; three connections pipeline 100 range
reads each of one ledger at once, beside adds to another ledger on a fourth."""

from __future__ import annotations

import asyncio

from minipulsar.net import connect
from minipulsar.protocol.commands import AddEntry, ReadEntry
from tests.support.fixtures import bookie_fixture
from tests.support.process import ServerProcess
from tests.support.raw_client import RawClient
from tests.support.web import metric_value

bookie = bookie_fixture(settings={"maxReadsInProgressLimit": 1})
READERS, READS_EACH, ENTRIES = 3, 100, 50


async def test_reads_past_the_limit_wait_and_are_all_served(bookie: ServerProcess) -> None:
    writer = await connect(RawClient, bookie.host, bookie.port)
    readers = [await connect(RawClient, bookie.host, bookie.port) for _ in range(READERS)]
    try:
        await asyncio.gather(
            *(writer.request(AddEntry, ledger_id=1, entry_id=i, payload=b"%d" % i) for i in range(ENTRIES))
        )
        blocked_before = await metric_value(bookie, "bookkeeper_server_READ_ENTRY_BLOCKED")
        assert blocked_before == 0

        reads = [
            reader.request(ReadEntry, ledger_id=1, first_entry_id=i % ENTRIES, count=5)
            for i in range(READS_EACH)
            for reader in readers
        ]
        adds = [writer.request(AddEntry, ledger_id=2, entry_id=i, payload=bytes(100)) for i in range(100)]
        read_results, add_results = await asyncio.gather(asyncio.gather(*reads), asyncio.gather(*adds))

        for i, response in enumerate(read_results):
            first = (i // READERS) % ENTRIES
            expected = [(e, b"%d" % e) for e in range(first, min(first + 5, ENTRIES))]
            assert [(e, payload) for e, payload in response.entries] == expected
        assert [r.entry_id for r in add_results] == list(range(100)), "adds are not held up by the read limit"
        blocked = await metric_value(bookie, "bookkeeper_server_READ_ENTRY_BLOCKED")
        assert blocked is not None and blocked > 0, "no read was ever blocked with a limit of 1"
        waited = await metric_value(bookie, "bookkeeper_server_READ_ENTRY_BLOCKED_WAIT_count", {"success": "true"})
        assert waited == blocked, "every blocked read got its permit"
        gave_up = await metric_value(bookie, "bookkeeper_server_READ_ENTRY_BLOCKED_WAIT_count", {"success": "false"})
        assert gave_up == 0
    finally:
        writer.close()
        for reader in readers:
            reader.close()
