"""The bookie's admin REST API: BookKeeper's HTTP endpoints that apply to this bookie, with
their paths and JSON shapes, beside ``/metrics`` on ``httpServerPort``.

- ``GET /heartbeat``: ``OK`` while the HTTP server answers;
- ``GET /api/v1/bookie/is_ready``: 200 once the bookie serves (registered), 503 before and
  while it stops — for readiness probes;
- ``GET /api/v1/bookie/state``: ``running``, ``readOnly``, ``shuttingDown`` and
  ``availableForHighPriorityWrites`` (recovery adds: refused once a journal failed, or every
  ledger dir failed);
- ``GET|PUT /api/v1/bookie/state/readonly``: ``{"readOnly": bool}``. PUT true turns the bookie
  read-only by hand (draining it before it is taken out: brokers place no new ledgers on it,
  reads are served) until PUT false; the disk monitor does not undo it, and a restart does
  only without ``persistBookieStatusEnabled`` (:mod:`bookie.bookie_status`). PUT false clears
  only that cause: a bookie with no writable ledger dir stays read-only, and the
  answer says so. The answer comes once the registration has moved. Refused (400) with
  ``forceReadOnlyBookie`` (false asked) and with ``readOnlyModeEnabled=false`` (true asked;
  BookKeeper would shut the bookie down);
- ``GET /api/v1/bookie/info``: free and total space plus the load report (:mod:`bookie.load`);
- ``PUT /api/v1/bookie/gc`` (``{"forceMajor": bool, "forceMinor": bool}``, answers when the
  round is done) and ``GET /api/v1/bookie/gc`` (``is_in_force_gc``);
- BookKeeper's ``/api/v1/autorecovery/...`` over the bookie's metadata session (the state is in
  the metadata store, so any bookie answers for the cluster): ``status`` (GET; PUT
  ``?enabled=true|false``), ``list_under_replicated_ledger`` (GET; ``?printmissingreplica=true``
  adds the bookies to replace), ``who_is_auditor`` (GET), ``lost_bookie_recovery_delay`` (GET;
  PUT ``{"delay_seconds": n}``), ``bookie`` (PUT ``{"bookie_src": ["host:port", ...]}``: mark
  their ledgers for re-replication; answers the marked ledger ids) and ``decommission`` (PUT
  ``{"bookie_src": "host:port"}``: starts draining it in the background, as BookKeeper's;
  asked of itself, the bookie first turns read-only by hand; another bookie must be read-only
  or down; ``admin bookies decommission`` waits for the end).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from minipulsar.bookkeeper.replication import admin as recovery_admin
from minipulsar.bookkeeper.replication.underreplication_manager import LedgerUnderreplicationManager
from minipulsar.config import parse_bool
from minipulsar.errors import MiniPulsarError, ServiceNotReadyError
from minipulsar.metadata.store import MetadataStore
from minipulsar.supervision import spawn

if TYPE_CHECKING:
    from minipulsar.bookie.bookie_impl import BookieImpl
    from minipulsar.bookie.load import BookieLoad
    from minipulsar.bookie.state_manager import BookieStateManager
    from minipulsar.config import BookieConfig

log = logging.getLogger(__name__)

DECOMMISSION_TIMEOUT_S = 24 * 3600.0
"""A decommission started through REST drains for at most this long (it logs how it ended)."""

READ_ONLY_BY_HAND = "set read-only through PUT /api/v1/bookie/state/readonly"
FORCE_READ_ONLY = "forceReadOnlyBookie=true"


class BookieAdmin(Protocol):
    """What the REST API reads and asks of the bookie process (:class:`BookieServer`)."""

    config: BookieConfig
    bookie: BookieImpl
    state: BookieStateManager
    load: BookieLoad
    serving: bool
    """Registered and taking requests."""
    failed_journals: set[int]
    store: MetadataStore | None
    """The bookie's metadata session (None before it is open)."""

    @property
    def bookie_id(self) -> str: ...

    @property
    def stopping(self) -> bool: ...

    async def set_read_only_by_hand(self, read_only: bool) -> None: ...


class BookieHttpApi:
    def __init__(self, service: BookieAdmin) -> None:
        self._service = service
        self._decommissions: set[asyncio.Task[None]] = set()

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/heartbeat", self.heartbeat),
            web.get("/api/v1/bookie/is_ready", self.is_ready),
            web.get("/api/v1/bookie/state", self.state),
            web.get("/api/v1/bookie/state/readonly", self.read_only),
            web.put("/api/v1/bookie/state/readonly", self.set_read_only),
            web.get("/api/v1/bookie/info", self.info),
            web.put("/api/v1/bookie/gc", self.force_gc),
            web.get("/api/v1/bookie/gc", self.gc_status),
            web.get("/api/v1/autorecovery/status", self.autorecovery_status),
            web.put("/api/v1/autorecovery/status", self.set_autorecovery_status),
            web.get("/api/v1/autorecovery/list_under_replicated_ledger", self.list_under_replicated),
            web.get("/api/v1/autorecovery/who_is_auditor", self.who_is_auditor),
            web.get("/api/v1/autorecovery/lost_bookie_recovery_delay", self.lost_bookie_recovery_delay),
            web.put("/api/v1/autorecovery/lost_bookie_recovery_delay", self.set_lost_bookie_recovery_delay),
            web.put("/api/v1/autorecovery/bookie", self.recover_bookie),
            web.put("/api/v1/autorecovery/decommission", self.decommission),
        ]

    async def heartbeat(self, request: web.Request) -> web.Response:
        return web.Response(text="OK\n")

    async def is_ready(self, request: web.Request) -> web.Response:
        if self._service.serving and not self._service.stopping:
            return web.Response(text="OK\n")
        return web.Response(status=503, text="the bookie is not serving\n")

    async def state(self, request: web.Request) -> web.Response:
        service = self._service
        return web.json_response(
            {
                "running": service.serving,
                "readOnly": service.state.read_only,
                "shuttingDown": service.stopping,
                "availableForHighPriorityWrites": service.serving
                and not service.stopping
                and not service.failed_journals
                and bool(service.bookie.dirs_manager.healthy_dirs),
            }
        )

    async def read_only(self, request: web.Request) -> web.Response:
        return web.json_response({"readOnly": self._service.state.read_only})

    async def set_read_only(self, request: web.Request) -> web.Response:
        service = self._service
        body = await _json_object(request)
        if body is None or "readOnly" not in body:
            return _error(400, 'the body must be a JSON object {"readOnly": true|false}')
        try:
            wanted = _json_flag(body, "readOnly")
        except ValueError as exc:
            return _error(400, str(exc))
        if not service.serving or service.stopping:
            return _error(503, "the bookie is not serving")
        if wanted and not service.config.read_only_mode_enabled:
            return _error(400, "readOnlyModeEnabled=false: this bookie cannot turn read-only")
        if not wanted and FORCE_READ_ONLY in service.state.causes:
            return _error(
                400, "Bookie is in forceReadOnly mode (forceReadOnlyBookie=true), cannot transit to writable mode"
            )
        await service.set_read_only_by_hand(wanted)
        return web.json_response({"readOnly": service.state.read_only})

    async def info(self, request: web.Request) -> web.Response:
        service = self._service
        free, total = service.load.disk_space()
        return web.json_response(
            {
                "bookieId": service.bookie_id,
                "freeSpace": free,
                "totalSpace": total,
                **service.bookie.info(),
                **service.load.report(),
            }
        )

    async def force_gc(self, request: web.Request) -> web.Response:
        """One GC round now, compaction forced as the body says (both by default); answers
        when the round is done."""
        gc = self._service.bookie.gc
        if gc is None or self._service.stopping:
            return _error(503, "the bookie is not serving")
        body: dict[str, Any] = {}
        if request.can_read_body:
            parsed = await _json_object(request)
            if parsed is None:
                return _error(400, "the body must be a JSON object")
            body = parsed
        try:
            force_major, force_minor = (_json_flag(body, key, default=True) for key in ("forceMajor", "forceMinor"))
        except ValueError as exc:
            return _error(400, str(exc))
        try:
            result = await gc.force(force_major, force_minor)
        except ServiceNotReadyError as exc:
            return _error(503, str(exc))
        return web.json_response(result.to_json())

    async def gc_status(self, request: web.Request) -> web.Response:
        gc = self._service.bookie.gc
        return web.json_response({"is_in_force_gc": gc is not None and gc.forcing})

    # -- AutoRecovery ----------------------------------------------------------------------------

    def _store(self) -> MetadataStore:
        store = self._service.store
        if store is None:
            raise web.HTTPServiceUnavailable(text="the bookie has no metadata session yet")
        return store

    async def autorecovery_status(self, request: web.Request) -> web.Response:
        return web.json_response({"enabled": await recovery_admin.autorecovery_enabled(self._store())})

    async def set_autorecovery_status(self, request: web.Request) -> web.Response:
        try:
            enabled = parse_bool(request.query.get("enabled"))
        except ValueError:
            return _error(400, "enabled must be true or false")
        await recovery_admin.set_autorecovery_enabled(self._store(), enabled)
        return web.json_response({"enabled": enabled})

    async def list_under_replicated(self, request: web.Request) -> web.Response:
        marks = await LedgerUnderreplicationManager(self._store()).list_underreplicated()
        if request.query.get("printmissingreplica", "false").lower() == "true":
            return web.json_response({str(m.ledger_id): sorted(m.missing_replicas) for m in marks})
        return web.json_response([m.ledger_id for m in marks])

    async def who_is_auditor(self, request: web.Request) -> web.Response:
        auditor = await recovery_admin.who_is_auditor(self._store())
        if auditor is None:
            return _error(404, "no auditor is elected")
        return web.json_response({"Auditor": auditor})

    async def lost_bookie_recovery_delay(self, request: web.Request) -> web.Response:
        urm = LedgerUnderreplicationManager(self._store())
        delay_s = await urm.lost_bookie_recovery_delay_s(self._service.config.lost_bookie_recovery_delay_s)
        return web.json_response({"lostBookieRecoveryDelay": delay_s})

    async def set_lost_bookie_recovery_delay(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        delay = body.get("delay_seconds") if body is not None else None
        if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
            return _error(400, 'the body must be {"delay_seconds": n} with n >= 0')
        await LedgerUnderreplicationManager(self._store()).set_lost_bookie_recovery_delay_s(delay)
        return web.json_response({"lostBookieRecoveryDelay": delay})

    async def recover_bookie(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        sources = body.get("bookie_src") if body is not None else None
        if not isinstance(sources, list) or not sources or not all(isinstance(b, str) for b in sources):
            return _error(400, 'the body must be {"bookie_src": ["host:port", ...]}')
        marked: set[int] = set()
        for bookie in sources:
            marked |= await recovery_admin.recover_bookie(self._store(), bookie)
        return web.json_response({"markedLedgers": sorted(marked)})

    async def decommission(self, request: web.Request) -> web.Response:
        body = await _json_object(request)
        bookie = body.get("bookie_src") if body is not None else None
        if not isinstance(bookie, str) or not bookie:
            return _error(400, 'the body must be {"bookie_src": "host:port"}')
        if bookie == self._service.bookie_id and not self._service.state.read_only:
            if not self._service.config.read_only_mode_enabled:
                return _error(400, "readOnlyModeEnabled=false: this bookie cannot turn read-only to be drained")
            await self._service.set_read_only_by_hand(True)  # no new ledger here; writers move off it
        task = spawn(self._decommission(bookie), name=f"decommission {bookie}", logger=log)
        self._decommissions.add(task)
        task.add_done_callback(self._decommissions.discard)
        return web.json_response({"decommissioning": bookie})

    async def close(self) -> None:
        """Cancel the decommissions still running (at the bookie's stop)."""
        tasks, self._decommissions = self._decommissions, set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _decommission(self, bookie: str) -> None:
        try:
            await recovery_admin.decommission_bookie(self._store(), bookie, DECOMMISSION_TIMEOUT_S)
        except MiniPulsarError as error:
            log.warning("decommission of %s failed: %s", bookie, error)
            return
        log.info("decommissioned %s: no ledger has a fragment on it, its cookie is deleted", bookie)


async def _json_object(request: web.Request) -> dict[str, Any] | None:
    """The request's JSON body if it is an object, else None (also for JSON nested too deep
    for the parser: ``json`` raises RecursionError there, not ValueError)."""
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _json_flag(body: dict[str, Any], key: str, default: bool | None = None) -> bool:
    """A boolean of a request body, spelled as in a config file.

    Raises:
        ValueError: anything else (``bool("false")`` would be true).
    """
    value = body.get(key, default)
    try:
        return parse_bool(value)
    except ValueError:
        raise ValueError(f"{key} must be true or false, got {value!r}") from None


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
