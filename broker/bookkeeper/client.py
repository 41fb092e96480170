"""The broker's BookKeeper client: create, open (with recovery) and delete ledgers."""

from __future__ import annotations

from minipulsar.errors import NoSuchLedgerError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore

from broker.bookkeeper.bookie_client import BookieClient
from broker.bookkeeper.ledger_handle import LedgerHandle
from broker.bookkeeper.ledger_id import LedgerIdAllocator
from broker.bookkeeper.ledger_metadata import LedgerMetadata, ledger_path
from broker.bookkeeper.placement import DefaultEnsemblePlacementPolicy
from broker.bookkeeper.recovery import recover_ledger


class BookKeeper:
    def __init__(self, store: MetadataStore, *, timeout_s: float, max_frame_size: int) -> None:
        self._store = store
        self.bookies = BookieClient(timeout_s=timeout_s, max_frame_size=max_frame_size)
        self._ids = LedgerIdAllocator(store)
        self.placement = DefaultEnsemblePlacementPolicy(store)

    async def create_ledger(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                            custom: dict[str, str] | None = None) -> LedgerHandle:
        """A new ledger, open for writing by this client.

        Raises:
            NotEnoughBookiesError: fewer writable bookies than ``ensemble_size``.
        """
        ensemble = await self.placement.new_ensemble(ensemble_size)
        ledger_id = await self._ids.allocate()
        metadata = LedgerMetadata(
            ledger_id=ledger_id, ensemble_size=ensemble_size, write_quorum=write_quorum,
            ack_quorum=ack_quorum, ensembles=((0, tuple(ensemble)),), custom=custom or {},
        )
        stat = await self._store.put(ledger_path(ledger_id), metadata.to_bytes(), NOT_EXISTS)
        metadata = LedgerMetadata.from_bytes(ledger_id, metadata.to_bytes(), stat.version)
        return LedgerHandle(metadata, self.bookies, self._store, writable=True)

    async def open_ledger(self, ledger_id: int, *, recovery: bool = True) -> LedgerHandle:
        """A read handle; with ``recovery`` an open ledger is fenced, recovered and closed first.

        Raises:
            NoSuchLedgerError: no metadata for ``ledger_id``.
        """
        metadata = await self.read_metadata(ledger_id)
        if recovery and not metadata.is_closed:
            metadata = await recover_ledger(metadata, self.bookies, self._store)
        return LedgerHandle(metadata, self.bookies, self._store, writable=False)

    async def read_metadata(self, ledger_id: int) -> LedgerMetadata:
        result = await self._store.get(ledger_path(ledger_id))
        if result is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} has no metadata")
        return LedgerMetadata.from_bytes(ledger_id, result.value, result.version)

    async def delete_ledger(self, ledger_id: int) -> None:
        """Forget the ledger's metadata (bookies reclaim the data in their garbage collection)."""
        try:
            await self._store.delete(ledger_path(ledger_id))
        except NotFoundError:
            pass

    async def close(self) -> None:
        await self.bookies.close()
