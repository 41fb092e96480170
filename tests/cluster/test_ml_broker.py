"""Managed-ledger settings through a real broker process: broker.conf's rollover and retention
keys reach every topic's managed ledger; consumed ledgers disappear from the ledger list and
from the ledger metadata, while a subscription that still needs data keeps it readable."""

from __future__ import annotations

import json
from pathlib import Path

from minipulsar import Client, InitialPosition
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.process import wait_for

ML_PATH = "/managed-ledgers/public/default/persistent/rolling"


async def test_broker_rolls_ledgers_and_trims_them_once_every_subscription_consumed_them(tmp_path: Path) -> None:
    """Goal: with managedLedgerMaxEntriesPerLedger=5 and no retention, a topic spreads over
    ledgers; ledgers stay while a subscription has not acknowledged them, and go (ML info and
    /ledgers/L…) once both subscriptions acknowledged everything.
    Method: 23 messages; subscription "a" acks all, "b" acks none, reads all, then acks all."""
    settings = {
        "managedLedgerMaxEntriesPerLedger": 5,
        "managedLedgerMinLedgerRolloverTimeMinutes": 0,
        "defaultRetentionTimeInMinutes": 0,
        "defaultRetentionSizeInMB": 0,
        "retentionCheckIntervalInSeconds": 1,
    }
    async with make_cluster(tmp_path, bookies=1, broker_settings=settings) as cluster:
        store = await open_metadata_store(cluster.metadata_url, session_timeout_ms=2000)
        try:
            async with Client(cluster.service_url) as client:
                a = await client.subscribe("rolling", "a", initial_position=InitialPosition.Earliest)
                b = await client.subscribe("rolling", "b", initial_position=InitialPosition.Earliest)
                producer = await client.create_producer("rolling")
                for i in range(23):
                    await producer.send(b"m-%d" % i)

                async def ledger_ids() -> list[int]:
                    return [item["ledgerId"] for item in json.loads((await store.get(ML_PATH)).value)["ledgers"]]

                first_ids = await ledger_ids()
                assert len(first_ids) >= 5, f"23 entries at 5 per ledger: {first_ids}"
                for _ in range(23):
                    await a.acknowledge(await a.receive(timeout_millis=10_000))
                received = [await b.receive(timeout_millis=10_000) for _ in range(23)]
                assert [m.data() for m in received] == [b"m-%d" % i for i in range(23)]
                assert await ledger_ids() == first_ids, "b has acknowledged nothing: every ledger is kept"
                for message in received:
                    await b.acknowledge(message)

                async def trimmed() -> bool:
                    return len(await ledger_ids()) == 1

                await wait_for(trimmed, timeout_s=10, message="consumed ledgers not trimmed")
                for ledger_id in first_ids[:-1]:
                    assert await store.get(f"/ledgers/L{ledger_id}") is None
        finally:
            await store.close()
