"""A real bookie process with two journals: the adds of one write, over ledgers of both
journals (admitted one by one) or of one journal (admitted together), with a (ledger, entry)
twice, are all durable and read back after a SIGKILL and a restart (the journals' replay)."""

from __future__ import annotations

from pathlib import Path

from minipulsar.protocol.commands import AddEntry
from tests.support.entries import entry_payload
from tests.support.process import ServerProcess, started
from tests.support.raw_client import RawBookieClient, is_ack
from tests.support.servers import bookie_process

SESSION_TIMEOUT_MS = 2000


def replaying_bookie(root: Path, metadata_url: str, port: int = 0, name: str = "bookie") -> ServerProcess:
    """A bookie with two journals and no checkpoint: a restart replays both journals."""
    return bookie_process(
        root,
        metadata_url,
        port=port,
        journals=("journal-a", "journal-b"),
        ledgers=("ledgers-a", "ledgers-b"),
        settings={"zkTimeout": SESSION_TIMEOUT_MS, "flushInterval": 3_600_000},
        name=name,
    )


async def write_and_ack(client: RawBookieClient, adds: list[AddEntry]) -> None:
    await client.send(adds)  # one write: small, so on loopback the bookie takes it in one read
    answers = await client.answers(adds)
    assert all(is_ack(answers[add.id], add) for add in adds), [answers[a.id] for a in adds]


async def test_one_write_over_two_journals_survives_sigkill(tmp_path: Path, metastore: ServerProcess) -> None:
    """Goal: every acknowledged add of writes mixing the ledgers of two journals reads back
    byte-identical after a SIGKILL, and a (ledger, entry) added twice reads back as the last.
    Method: ledgers 1..4 (journals 1, 0, 1, 0); one write over all four with entry 1:0 again
    at its end, one over ledgers 1 and 3, one over 2 and 4; SIGKILL; restart; read all."""
    url = f"metastore://{metastore.address}"
    first = replaying_bookie(tmp_path, url)
    async with started(first):
        client = await RawBookieClient.connected(first.host, first.port)
        mixed = [
            client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id))
            for entry_id in range(5)
            for ledger_id in (1, 2, 3, 4)
        ]
        await write_and_ack(client, [*mixed, client.add(1, 0, entry_payload(1, 0, "last"))])
        for ledgers in ((1, 3), (2, 4)):
            await write_and_ack(
                client,
                [
                    client.add(ledger_id, entry_id, entry_payload(ledger_id, entry_id))
                    for entry_id in range(5, 10)
                    for ledger_id in ledgers
                ],
            )
        first.kill()
        client.close()
    second = replaying_bookie(tmp_path, url, port=first.port, name="bookie-restarted")
    async with started(second):
        client = await RawBookieClient.connected(second.host, second.port)
        try:
            for ledger_id in (1, 2, 3, 4):
                expected = [(e, entry_payload(ledger_id, e)) for e in range(10)]
                if ledger_id == 1:
                    expected[0] = (0, entry_payload(1, 0, "last"))
                assert await client.read_all(ledger_id, 10) == expected, f"ledger {ledger_id}"
        finally:
            client.close()
