"""The bookie's registration: an ephemeral key ``/ledgers/available/{bookie_id}`` in the metadata store.

Brokers pick ensembles among the children of ``/ledgers/available`` (DESIGN §4). The key is
ephemeral, so it disappears when the bookie's session ends — cleanly (unregister, close) or
because the bookie died and stopped heart-beating.

Invariants:
- the key is created create-only. A key that carries this bookie's own instance id was left
  by a previous run of this very bookie (a SIGKILL; its session has not expired yet): the
  bookie holds its directory locks, so that run is dead, and the key is replaced at once.
  Any other existing key is waited out, as BookKeeper does, for up to the session timeout
  plus a margin; a key that stays means another live bookie has this id;
- while registered, the key is re-created whenever it goes away: on a session event (lost,
  re-established, reconnected) or a ``deleted`` notification for the key, retrying with
  back-off until it succeeds or the bookie stops.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from minipulsar.errors import AlreadyExistsError, MiniPulsarError, NotFoundError
from minipulsar.metadata.store import MetadataStore, Notification, NotificationType, SessionEvent, NOT_EXISTS

log = logging.getLogger(__name__)

AVAILABLE_PATH = "/ledgers/available"
DEFAULT_RACK = "/default-rack"
RETRY_DELAY_S = (0.1, 0.2, 0.5, 1.0, 2.0)
POLL_INTERVAL_S = 0.1


class BookieIdInUseError(MiniPulsarError):
    """Another live bookie holds this bookie id's registration."""


def registration_path(bookie_id: str) -> str:
    return f"{AVAILABLE_PATH}/{bookie_id}"


class BookieRegistration:
    def __init__(self, store: MetadataStore, bookie_id: str, info: dict, session_timeout_ms: int) -> None:
        self.store = store
        self.bookie_id = bookie_id
        self.path = registration_path(bookie_id)
        self.value = json.dumps(info, sort_keys=True).encode()
        self._session_timeout_s = session_timeout_ms / 1000
        self._registered = False
        self._task: asyncio.Task[None] | None = None
        self._again = False

    async def register(self) -> None:
        """Create the key, waiting out a stale one; then keep it alive.

        Raises:
            BookieIdInUseError: the key stayed beyond the session timeout.
        """
        self.store.watch(self.path, self._on_notification)
        self.store.add_session_listener(self._on_session_event)
        deadline = time.monotonic() + self._session_timeout_s * 1.5 + 2.0
        waited = False
        while not await self._create():
            if await self._replace_own_stale_key():
                continue
            if not waited:
                log.info("%s exists (a previous run whose session has not expired yet?); waiting for it to go",
                         self.path)
                waited = True
            if time.monotonic() > deadline:
                raise BookieIdInUseError(
                    f"{self.path} still exists after the session timeout: is another bookie running as "
                    f"{self.bookie_id}?")
            await asyncio.sleep(POLL_INTERVAL_S)
        self._registered = True
        log.info("registered as %s", self.path)

    async def _replace_own_stale_key(self) -> bool:
        """Delete the existing key if a previous run of this bookie left it; True if deleted."""
        existing = await self.store.get(self.path)
        if existing is None:
            return True
        try:
            owner = json.loads(existing.value).get("instanceId")
        except (ValueError, AttributeError):
            return False
        if owner is None or owner != json.loads(self.value).get("instanceId"):
            return False
        log.info("%s was left by a previous run of this bookie; replacing it", self.path)
        try:
            await self.store.delete(self.path, existing.version)
        except (NotFoundError, MiniPulsarError):
            pass
        return True

    async def _create(self) -> bool:
        """True when the key is created by us now; False when a key is already there."""
        try:
            await self.store.put(self.path, self.value, NOT_EXISTS, ephemeral=True)
        except AlreadyExistsError:
            return False
        return True

    async def unregister(self) -> None:
        """Delete the key (best effort: closing the store's session removes it anyway)."""
        self._registered = False
        if self._task is not None:
            self._task.cancel()
        try:
            await self.store.delete(self.path)
        except NotFoundError:
            pass
        except MiniPulsarError as exc:
            log.warning("could not delete %s: %s", self.path, exc)

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
                    log.info("re-registered as %s", self.path)
                # else: the key is there — ours, or a stale one whose deletion will notify us.
                if not self._again:
                    return
            except MiniPulsarError as exc:
                delay = RETRY_DELAY_S[min(attempt, len(RETRY_DELAY_S) - 1)]
                log.warning("re-registering %s failed (%s); retrying in %.1fs", self.path, exc, delay)
                attempt += 1
                await asyncio.sleep(delay)
