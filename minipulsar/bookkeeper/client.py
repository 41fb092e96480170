"""The broker's BookKeeper client: create, open (with recovery) and delete ledgers; choose
bookies for ensembles; keep the bookie quarantine and the load reports placement uses.

Invariants:

- a ledger is created with an ensemble of distinct writable bookies, as the placement policy
  chose them;
- opening a ledger that is not closed recovers and closes it first (unless asked not to).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from minipulsar.bookkeeper.add_budget import AddBudget
from minipulsar.bookkeeper.bookie_client import BookieClient
from minipulsar.bookkeeper.bookie_load_poller import BookieLoadPoller
from minipulsar.bookkeeper.bookie_registry import BookieRegistry
from minipulsar.bookkeeper.cluster_view import ClusterView
from minipulsar.bookkeeper.context import ClientContext
from minipulsar.bookkeeper.digest import DigestType
from minipulsar.bookkeeper.ledger_handle import LedgerHandle
from minipulsar.bookkeeper.ledger_id import LedgerIdAllocator
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, ledger_path
from minipulsar.bookkeeper.load_aware import LoadAwareEnsemblePlacementPolicy
from minipulsar.bookkeeper.metrics import PENDING_ADD_BYTES
from minipulsar.bookkeeper.placement import select_ensemble, select_replacement
from minipulsar.bookkeeper.placement_policies import placement_policy
from minipulsar.bookkeeper.quarantine import BookieQuarantine
from minipulsar.bookkeeper.recovery import read_last_add_confirmed, recover_ledger
from minipulsar.errors import NoSuchLedgerError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore
from minipulsar.supervision import Periodic

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BookKeeperSettings:
    """The client's knobs; :meth:`from_broker_config` maps Pulsar's broker keys onto them."""

    timeout_s: float = 30.0
    max_frame_size: int = 5 * 1024 * 1024 + 64 * 1024
    ensemble_placement_policy: str = "RackawareEnsemblePlacementPolicy"
    bookie_load_poll_interval_s: float = 5.0
    speculative_read_timeout_s: float = 0.0
    health_check_enabled: bool = True
    health_check_interval_s: float = 60.0
    health_check_error_threshold: int = 5
    quarantine_time_s: float = 1800.0
    quarantine_ratio: float = 1.0
    max_pending_add_bytes_per_ledger: int = 16 * 1024 * 1024
    max_pending_add_bytes: int = 128 * 1024 * 1024
    digest_type: DigestType = DigestType.CRC32C
    password: bytes = b""

    @classmethod
    def from_broker_config(cls, config) -> BookKeeperSettings:
        return cls(
            timeout_s=config.bookkeeper_timeout_s,
            max_frame_size=config.max_frame_size,
            ensemble_placement_policy=config.ensemble_placement_policy,
            bookie_load_poll_interval_s=config.bookie_load_poll_interval_s,
            speculative_read_timeout_s=config.speculative_read_timeout_ms / 1000,
            health_check_enabled=config.health_check_enabled,
            health_check_interval_s=config.health_check_interval_s,
            health_check_error_threshold=config.health_check_error_threshold,
            quarantine_time_s=config.quarantine_time_s,
            quarantine_ratio=config.quarantine_ratio,
            max_pending_add_bytes_per_ledger=config.max_pending_add_bytes_per_ledger,
            max_pending_add_bytes=config.max_pending_add_bytes,
            digest_type=DigestType(config.digest_type),
            password=config.password.encode(),
        )


class BookKeeper:
    def __init__(
        self, store: MetadataStore, settings: BookKeeperSettings | None = None, rng: random.Random | None = None
    ) -> None:
        self.settings = settings = settings or BookKeeperSettings()
        self._store = store
        self._rng = rng or random.Random()
        self.bookies = BookieClient(timeout_s=settings.timeout_s, max_frame_size=settings.max_frame_size)
        self.registry = BookieRegistry(store)
        self._ids = LedgerIdAllocator(store)
        self.placement = placement_policy(
            settings.ensemble_placement_policy, self._rng, load_stale_after_s=3 * settings.bookie_load_poll_interval_s
        )
        self.quarantine = BookieQuarantine(
            error_threshold_per_interval=settings.health_check_error_threshold,
            quarantine_time_s=settings.quarantine_time_s,
            quarantine_ratio=settings.quarantine_ratio,
            rng=self._rng,
        )
        self.load_poller = BookieLoadPoller(self.registry, self.bookies, settings.bookie_load_poll_interval_s)
        add_budget = AddBudget(settings.max_pending_add_bytes)
        # Read at scrape time: a gauge set on every add took a lock per add.
        PENDING_ADD_BYTES.set_function(lambda: add_budget.in_use)
        self._ctx = ClientContext(
            bookies=self.bookies,
            store=store,
            replace_bookie=self._replace_bookie,
            record_error=self._record_error,
            client_add_budget=add_budget,
            max_pending_add_bytes_per_ledger=settings.max_pending_add_bytes_per_ledger,
            speculative_read_timeout_s=settings.speculative_read_timeout_s,
        )
        self._health_check = Periodic(
            "bookie health check", settings.health_check_interval_s, self._check_health, logger=log
        )
        """Every ``bookieHealthCheckIntervalSeconds``: the quarantine's check (when enabled)."""

    async def start(self) -> None:
        """Watch the bookie registry; start the health check and, for load-aware placement, the poller."""
        self.registry.start()
        if self.settings.health_check_enabled and not self._health_check.running:
            self._health_check.start()
        if isinstance(self.placement, LoadAwareEnsemblePlacementPolicy):
            self.load_poller.start()

    def _check_health(self) -> None:
        self.quarantine.check()

    def _record_error(self, bookie: str, error: BaseException) -> None:
        if self.settings.health_check_enabled:
            self.quarantine.record_error(bookie, error)

    async def cluster_view(self) -> ClusterView:
        bookies = await self.registry.bookies()
        return ClusterView(
            writable=bookies.writable,
            read_only=bookies.read_only,
            racks=bookies.racks,
            loads=dict(self.load_poller.reports),
            quarantined=self.quarantine.quarantined(),
            now_s=time.monotonic(),
        )

    async def _replace_bookie(
        self, ensemble: Sequence[str], index: int, write_quorum: int, ack_quorum: int, exclude: frozenset[str]
    ) -> str:
        return select_replacement(
            self.placement, ensemble, index, write_quorum, ack_quorum, await self.cluster_view(), exclude
        )

    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        custom: dict[str, str] | None = None,
        *,
        id_above: int = -1,
        digest_type: DigestType | None = None,
        password: bytes | None = None,
    ) -> LedgerHandle:
        """A new ledger, open for writing by this client, with an id greater than ``id_above``
        (a managed ledger passes its last ledger id: its positions order by ledger id), its
        entries digested with ``digest_type`` and its master key derived from ``password``
        (by default the settings' ``managedLedgerDigestType`` / ``managedLedgerPassword``).

        Raises:
            NotEnoughBookiesError: fewer writable bookies than ``ensemble_size``.
        """
        ensemble = select_ensemble(self.placement, ensemble_size, write_quorum, ack_quorum, await self.cluster_view())
        ledger_id = await self._ids.allocate(above=id_above)
        metadata = LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            ensembles=((0, tuple(ensemble)),),
            custom=custom or {},
            digest_type=self.settings.digest_type if digest_type is None else digest_type,
            password=self.settings.password if password is None else password,
        )
        stat = await self._store.put(ledger_path(ledger_id), metadata.to_bytes(), NOT_EXISTS)
        metadata = LedgerMetadata.from_bytes(ledger_id, metadata.to_bytes(), stat.version)
        return LedgerHandle(metadata, self._ctx, writable=True)

    async def open_ledger(self, ledger_id: int, *, recovery: bool = True) -> LedgerHandle:
        """A read handle. With ``recovery`` an open ledger is fenced, recovered and closed first;
        without, reads of an open ledger stop at the LAC the bookies report.

        Raises:
            NoSuchLedgerError: no metadata for ``ledger_id``.
            PersistenceError: too few bookies answered.
        """
        metadata = await self.read_metadata(ledger_id)
        if metadata.is_closed:
            return LedgerHandle(metadata, self._ctx, writable=False)
        if recovery:
            metadata = await recover_ledger(metadata, self._ctx)
            return LedgerHandle(metadata, self._ctx, writable=False)
        lac = await read_last_add_confirmed(metadata, self.bookies, fence=False)
        return LedgerHandle(metadata, self._ctx, writable=False, last_add_confirmed=lac)

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
        await self._health_check.stop()
        await self.load_poller.stop()
        await self.bookies.close()
