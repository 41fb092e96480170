"""The bookie's registration: an ephemeral key ``/ledgers/available/{bookie_id}`` in the metadata store.

Brokers pick ensembles among the children of ``/ledgers/available`` (docs/design.md §4). The key is
ephemeral, so it disappears when the bookie's session ends — cleanly (unregister, close) or
because the bookie died and stopped heart-beating. A read-only bookie (every ledger dir full)
is registered under ``/ledgers/available/readonly/{bookie_id}`` instead: brokers skip the
``readonly`` child when they place new ledgers, and still read from it.

Invariants:
- the key is created create-only. A key that carries this bookie's own instance id was left
  by a previous run of this very bookie (a SIGKILL; its session has not expired yet): the
  bookie holds its directory locks, so that run is dead, and the key is replaced at once.
  Any other existing key is waited out, as BookKeeper does, for up to the session timeout
  plus a margin; a key that stays means another live bookie has this id;
- while registered, the key is re-created whenever it goes away: on a session event (lost,
  re-established, reconnected) or a ``deleted`` notification for the key, retrying with
  back-off until it succeeds or the bookie stops;
- a move between the writable and the read-only path (:meth:`set_read_only`) goes through the
  same retrying task: create the key at the new path first, then delete this bookie's key at
  the old one (as BookKeeper does), so the bookie is never missing from both. A key at the old
  path is deleted only if it carries this bookie's instance id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from minipulsar.errors import AlreadyExistsError, BadVersionError, MiniPulsarError, NotFoundError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore, Notification, NotificationType, SessionEvent

log = logging.getLogger(__name__)

AVAILABLE_PATH = "/ledgers/available"
READONLY_PATH = f"{AVAILABLE_PATH}/readonly"
DEFAULT_RACK = "/default-rack"
RETRY_DELAY_S = (0.1, 0.2, 0.5, 1.0, 2.0)
POLL_INTERVAL_S = 0.1


class BookieIdInUseError(MiniPulsarError):
    """Another live bookie holds this bookie id's registration."""


def registration_path(bookie_id: str, read_only: bool = False) -> str:
    return f"{READONLY_PATH if read_only else AVAILABLE_PATH}/{bookie_id}"


class BookieRegistration:
    def __init__(
        self, store: MetadataStore, bookie_id: str, info: dict, session_timeout_ms: int, read_only: bool = False
    ) -> None:
        self.store = store
        self.bookie_id = bookie_id
        self.read_only = read_only
        self.value = json.dumps(info, sort_keys=True).encode()
        self._instance_id = info.get("instanceId")
        self._session_timeout_s = session_timeout_ms / 1000
        self._registered = False
        self._task: asyncio.Task[None] | None = None
        self._again = False

    @property
    def path(self) -> str:
        """Where the key belongs now (the writable or the read-only path)."""
        return registration_path(self.bookie_id, self.read_only)

    @property
    def other_path(self) -> str:
        return registration_path(self.bookie_id, not self.read_only)

    async def register(self) -> None:
        """Create the key, waiting out a stale one; then keep it alive.

        Raises:
            BookieIdInUseError: the key stayed beyond the session timeout.
        """
        self.store.watch(self.path, self._on_notification)
        self.store.watch(self.other_path, self._on_notification)
        self.store.add_session_listener(self._on_session_event)
        deadline = time.monotonic() + self._session_timeout_s * 1.5 + 2.0
        waited = False
        while not await self._create(path := self.path):
            if await self._replace_own_stale_key():
                continue
            if not waited:
                log.info(
                    "%s exists (a previous run whose session has not expired yet?); waiting for it to go", self.path
                )
                waited = True
            if time.monotonic() > deadline:
                raise BookieIdInUseError(
                    f"{self.path} still exists after the session timeout: is another bookie running as "
                    f"{self.bookie_id}?"
                )
            await asyncio.sleep(POLL_INTERVAL_S)
        self._registered = True
        log.info("registered as %s", path)
        if path != self.path:  # turned read-only (or back) while the key was being created:
            self._ensure_registered()  # create it where it belongs now and delete this one
            return
        try:
            await self._delete_own_key(self.other_path)  # a previous run's, if it was in the other mode
        except MiniPulsarError as exc:  # it expires with that run's session anyway
            log.warning("could not check %s for a key of a previous run: %s", self.other_path, exc)

    def set_read_only(self, read_only: bool) -> None:
        """Move the key to the read-only path (True) or back (False), in the background."""
        if read_only == self.read_only:
            return
        self.read_only = read_only
        log.info("moving the registration to %s", self.path)
        self._ensure_registered()

    async def settled(self) -> None:
        """Return once no move or re-registration is running (the key is where it belongs, or
        the bookie stopped)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    async def _replace_own_stale_key(self) -> bool:
        """Delete the existing key if a previous run of this bookie left it; True if deleted."""
        existing = await self.store.get(self.path)
        if existing is None:
            return True
        if not self._is_own(existing.value):
            return False
        log.info("%s was left by a previous run of this bookie; replacing it", self.path)
        try:
            await self.store.delete(self.path, existing.version)
        except (NotFoundError, MiniPulsarError):
            pass
        return True

    def _is_own(self, value: bytes) -> bool:
        """The key was written by this bookie (this run or an earlier one: same instance id)."""
        try:
            owner = json.loads(value).get("instanceId")
        except (ValueError, AttributeError):
            return False
        return owner is not None and owner == self._instance_id

    async def _delete_own_key(self, path: str) -> None:
        """Delete the key at ``path`` if this bookie wrote it."""
        existing = await self.store.get(path)
        if existing is None or not self._is_own(existing.value):
            return
        try:
            await self.store.delete(path, existing.version)
            log.info("deleted %s", path)
        except (NotFoundError, BadVersionError):
            pass  # gone already, or rewritten since we read it (then no longer ours to judge)

    async def _create(self, path: str | None = None) -> bool:
        """True when the key (at ``path``, default :attr:`path`) is created by us now; False
        when a key is already there."""
        try:
            await self.store.put(path or self.path, self.value, NOT_EXISTS, ephemeral=True)
        except AlreadyExistsError:
            return False
        return True

    async def unregister(self) -> None:
        """Delete the key (best effort: closing the store's session removes it anyway)."""
        self._registered = False
        if self._task is not None:
            self._task.cancel()
        for path in (self.path, self.other_path):  # both, in case a move was half done
            try:
                await self._delete_own_key(path)  # never another instance's key under this id
            except NotFoundError:
                pass
            except MiniPulsarError as exc:
                log.warning("could not delete %s: %s", path, exc)

    # -- keeping the key alive ------------------------------------------------------------------

    def _on_notification(self, notification: Notification) -> None:
        if notification.path == self.path and notification.type is NotificationType.DELETED:
            self._ensure_registered()

    def _on_session_event(self, event: SessionEvent) -> None:
        log.info("metadata session event: %s", event.value)
        if event is not SessionEvent.CONNECTION_LOST:
            self._ensure_registered()

    def _ensure_registered(self) -> None:
        if not self._registered:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.get_running_loop().create_task(self._reregister())

    async def _reregister(self) -> None:
        attempt = 0
        while self._registered:
            self._again = False
            try:
                if await self._create():
                    log.info("registered as %s", self.path)
                # else: the key is there — ours, or a stale one whose deletion will notify us.
                await self._delete_own_key(self.other_path)
                if not self._again:
                    return
            except MiniPulsarError as exc:
                delay = RETRY_DELAY_S[min(attempt, len(RETRY_DELAY_S) - 1)]
                log.warning("re-registering %s failed (%s); retrying in %.1fs", self.path, exc, delay)
                attempt += 1
                await asyncio.sleep(delay)
