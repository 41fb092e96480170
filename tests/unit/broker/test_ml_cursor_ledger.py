"""CursorLedger's logic (cursor_ledger.py) over in-memory bookies and the in-process metadata
store: the cursor ledger's entry format, appends with no metadata write, rollover by entries
and by age, the fallback to the key when the bookies refuse, recovery (fencing the previous
writer), clean close and delete — and that no ledger the key names is ever deleted."""

from __future__ import annotations

import json

import pytest

from minipulsar.broker.managed_ledger.config import ManagedLedgerConfig
from minipulsar.broker.managed_ledger.cursor import ManagedCursor
from minipulsar.broker.managed_ledger.cursor_ledger import CursorLedger, CursorLedgerState
from minipulsar.broker.managed_ledger.position import Position
from minipulsar.broker.managed_ledger.position_info import (
    CursorPosition,
    decode_position_info,
    encode_position_info,
)
from minipulsar.errors import ConnectionClosedError, LedgerFencedError, PersistenceError
from minipulsar.metadata.memory import MemoryMetadataStore
from tests.support.broker_fakes import closed_ledger
from tests.support.clock import ManualClock
from tests.support.memory_bookies import MemoryBookies

PATH = "/managed-ledgers/t/ns/persistent/x/sub"
P = Position


class CursorEnv:
    def __init__(self, **config) -> None:
        self.store = MemoryMetadataStore()
        self.bookies = MemoryBookies()
        self.clock = ManualClock()
        self.config = ManagedLedgerConfig(**config)

    def cursor_ledger(self) -> CursorLedger:
        return CursorLedger("t/ns/persistent/x", "sub", PATH, self.store, self.bookies, self.config, clock=self.clock)

    async def recover(self) -> tuple[CursorLedger, CursorPosition]:
        recovered = await CursorLedger.recover(
            "t/ns/persistent/x", "sub", PATH, self.store, self.bookies, self.config, self.clock
        )
        assert recovered is not None
        return recovered

    async def key(self) -> dict:
        stored = await self.store.get(PATH)
        assert stored is not None
        return json.loads(stored.value)

    async def key_version(self) -> int:
        stored = await self.store.get(PATH)
        assert stored is not None
        return stored.version

    def last_entry(self, ledger_id: int) -> CursorPosition:
        return decode_position_info(self.bookies.last_entry(ledger_id))


def at(entry_id: int, **properties: int) -> CursorPosition:
    return CursorPosition(P(5, entry_id), ((P(5, entry_id + 2), P(5, entry_id + 3)),), properties)


def test_a_position_entry_round_trips_and_garbage_is_a_typed_error() -> None:
    position = CursorPosition(P(7, 3), ((P(7, 5), P(7, 9)), (P(8, 0), P(8, 0))), {"p1": 2**40})
    assert decode_position_info(encode_position_info(position)) == position
    with pytest.raises(PersistenceError):
        decode_position_info(b"\x93not a map")


async def test_the_first_persist_creates_the_ledger_and_later_ones_write_no_metadata() -> None:
    env = CursorEnv()
    persistence = env.cursor_ledger()
    await persistence.persist(at(0))
    ledger_id = persistence.ledger_id
    assert env.bookies.ledgers[ledger_id].custom == {
        "pulsar/managed-ledger": "t/ns/persistent/x",
        "pulsar/cursor": "sub",
    }
    assert (await env.key())["cursorsLedgerId"] == ledger_id and (await env.key())["markDeleteEntryId"] == 0
    version = await env.key_version()
    for entry_id in range(1, 20):
        await persistence.persist(at(entry_id))
    assert await env.key_version() == version, "appends to the cursor ledger only"
    assert env.last_entry(ledger_id) == at(19) and len(env.bookies.ledgers[ledger_id].entries) == 20


async def test_rollover_by_entries_starts_the_new_ledger_with_the_position_then_deletes_the_old() -> None:
    env = CursorEnv(cursor_max_entries_per_ledger=3)
    persistence = env.cursor_ledger()
    for entry_id in range(3):
        await persistence.persist(at(entry_id))
    first = persistence.ledger_id
    await persistence.persist(at(3))
    second = persistence.ledger_id
    assert second != first and env.bookies.ledgers[second].entries == [encode_position_info(at(3))]
    assert (await env.key())["cursorsLedgerId"] == second and (await env.key())["markDeleteEntryId"] == 3
    assert env.bookies.deleted == [first] and first not in env.bookies.ledgers


async def test_rollover_by_age_happens_on_the_next_write() -> None:
    env = CursorEnv(cursor_rollover_time_s=60)
    persistence = env.cursor_ledger()
    await persistence.persist(at(0))
    first = persistence.ledger_id
    env.clock.advance(59)
    await persistence.persist(at(1))
    assert persistence.ledger_id == first
    env.clock.advance(1)
    await persistence.persist(at(2))
    assert persistence.ledger_id != first and env.bookies.deleted == [first]


async def test_bookies_refusing_an_append_put_the_whole_position_in_the_key_until_they_are_back() -> None:
    env = CursorEnv()
    persistence = env.cursor_ledger()
    await persistence.persist(at(0))
    failed = persistence.ledger_id
    env.bookies.down = True
    await persistence.persist(at(1, seq=4))
    key = await env.key()
    assert key["cursorsLedgerId"] == -1 and key["markDeleteEntryId"] == 1 and key["properties"] == {"seq": 4}
    assert key["individualDeletedMessages"] == [[5, 3, 5, 4]]
    assert persistence.state is CursorLedgerState.NO_LEDGER
    assert env.bookies.deleted == [failed], "deleted once the key no longer names it"
    env.bookies.down = False
    await persistence.persist(at(2))
    assert persistence.state is CursorLedgerState.OPEN and (await env.key())["cursorsLedgerId"] == persistence.ledger_id


async def test_a_failed_rollover_keeps_writing_to_the_old_ledger() -> None:
    env = CursorEnv(cursor_max_entries_per_ledger=1)
    persistence = env.cursor_ledger()
    await persistence.persist(at(0))
    first = persistence.ledger_id
    version = await env.key_version()
    env.bookies.refuse_creates = True
    await persistence.persist(at(1))
    assert persistence.ledger_id == first and env.last_entry(first) == at(1)
    assert await env.key_version() == version and not env.bookies.deleted
    env.bookies.refuse_creates = False
    await persistence.persist(at(2))
    assert persistence.ledger_id != first and env.bookies.deleted == [first], "retried on a later write"


async def test_recovery_reads_the_last_entry_and_fences_the_previous_writer() -> None:
    env = CursorEnv()
    previous = env.cursor_ledger()
    for entry_id in range(5):
        await previous.persist(at(entry_id, seq=entry_id))
    old_ledger = previous.ledger_id
    recovered, position = await env.recover()
    assert position == at(4, seq=4), "the ledger's last entry, not the key's older position"
    assert previous._handle is not None
    with pytest.raises(LedgerFencedError):
        await previous._handle.add(b"late")
    await recovered.persist(at(5))
    assert (await env.key())["cursorsLedgerId"] == recovered.ledger_id != old_ledger
    assert env.bookies.deleted == [old_ledger], "the recovered ledger goes once the key names the new one"


async def test_recovery_from_an_empty_or_missing_ledger_or_an_old_key_takes_the_key() -> None:
    env = CursorEnv()
    await env.store.put(PATH, json.dumps({"markDeleteLedgerId": 5, "markDeleteEntryId": 7}).encode())
    _, position = await env.recover()
    assert position == CursorPosition(P(5, 7)), "a key written before cursor ledgers"
    empty = await env.bookies.create_ledger(1, 1, 1)
    key = {"cursorsLedgerId": empty.ledger_id, "markDeleteLedgerId": 5, "markDeleteEntryId": 8}
    await env.store.put(PATH, json.dumps(key).encode())
    assert (await env.recover())[1] == CursorPosition(P(5, 8))
    await env.bookies.delete_ledger(empty.ledger_id)
    assert (await env.recover())[1] == CursorPosition(P(5, 8))


async def test_a_clean_close_stores_the_position_in_the_key_unless_it_has_many_ranges() -> None:
    env = CursorEnv(max_unacked_ranges_to_persist_in_metadata_store=1)
    persistence = env.cursor_ledger()
    await persistence.persist(at(0))
    await persistence.close(at(1))
    key = await env.key()
    assert key["cursorsLedgerId"] == -1 and key["markDeleteEntryId"] == 1 and not env.bookies.ledgers
    many = CursorPosition(P(5, 1), ((P(5, 3), P(5, 3)), (P(5, 5), P(5, 5))))
    reopened, _ = await env.recover()
    await reopened.persist(at(1))
    kept = reopened.ledger_id
    await reopened.close(many)
    assert (await env.key())["cursorsLedgerId"] == kept and env.bookies.ledgers[kept].closed
    assert (await env.recover())[1] == many


async def test_unsubscribing_deletes_the_key_then_the_cursor_ledger() -> None:
    store, bookies = MemoryMetadataStore(), MemoryBookies()
    ledger = closed_ledger(10, store=store, bookies=bookies)
    cursor = await ManagedCursor.open(ledger, "sub", store, start_at_earliest=True)
    await cursor.acknowledge([P(10, 0)])
    assert cursor.persistence is not None and bookies.ledgers
    await cursor.delete()
    assert await store.get(cursor.path) is None and not bookies.ledgers
    assert cursor.persistence.state is CursorLedgerState.DELETED


class DroppingStore(MemoryMetadataStore):
    """Its next put fails with ConnectionClosedError — after applying it when ``applied``."""

    def __init__(self) -> None:
        super().__init__()
        self.drop: bool | None = None

    async def put(self, path, value, expected_version=None, *, ephemeral=False):
        applied, self.drop = self.drop, None
        if applied is False:
            raise ConnectionClosedError("dropped before the put arrived")
        stat = await super().put(path, value, expected_version, ephemeral=ephemeral)
        if applied:
            raise ConnectionClosedError("dropped before the answer arrived")
        return stat


async def test_a_key_write_of_unknown_outcome_is_settled_by_reading_the_key_back() -> None:
    env = CursorEnv(cursor_max_entries_per_ledger=1)
    env.store = DroppingStore()
    persistence = env.cursor_ledger()
    env.store.drop = True  # applied, answer lost
    await persistence.persist(at(0))
    first = persistence.ledger_id
    assert (await env.key())["cursorsLedgerId"] == first
    env.store.drop = False  # never applied: the read back finds the key unchanged, so it is put again
    await persistence.persist(at(1))  # a rollover
    assert (await env.key())["cursorsLedgerId"] == persistence.ledger_id != first
    assert list(env.bookies.ledgers) == [persistence.ledger_id], "the ledger the key no longer names is deleted"
