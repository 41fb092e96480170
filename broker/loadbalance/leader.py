"""Load-manager leader election on the ephemeral key ``/loadbalance/leader``.

Every broker tries to create the key (create-only, ephemeral) with Pulsar's ``LeaderBroker``
JSON ``{"brokerId": "host:webport", "serviceUrl": "http://host:webport"}``; the one that
succeeds leads until its metadata session ends. The others watch the key and try again when it
is deleted. A broker whose session is lost stops leading at once (its key is gone, or will be);
after a new session it runs for election again. After a reconnection it runs a round too: the
leader key's deletion may have been notified while it was disconnected.

Invariant: ``is_leader`` is True only while this broker's create succeeded and no session loss
or deletion was seen since. ``leader_changes`` counts the changes of leader this broker saw
(``pulsar_lb_leader_changes_total``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from minipulsar.errors import AlreadyExistsError, MiniPulsarError
from minipulsar.metadata import MetadataStore, Notification, NotificationType, SessionEvent
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

HANDOVER_TIMEOUT_S = 2.0
"""How long a closing leader tries to delete its key before leaving it to its session."""

LEADER_PATH = "/loadbalance/leader"


class LeaderElection:
    def __init__(
        self,
        store: MetadataStore,
        broker_id: str,
        web_service_url: str,
        on_change: Callable[[bool], None] = lambda _: None,
    ) -> None:
        self._store = store
        self.broker_id = broker_id
        self._value = json.dumps({"brokerId": broker_id, "serviceUrl": web_service_url}).encode()
        self._on_change = on_change
        self.is_leader = False
        self.leader: str | None = None
        """The leader's broker id as last seen (None: no leader known)."""
        self.leader_changes = 0
        self._closed = False
        self._elect_task: asyncio.Task[None] | None = None
        self._again = False

    async def start(self) -> None:
        self._store.watch(LEADER_PATH, self._notified)
        self._store.add_session_listener(self._session_event)
        self.elect_soon()  # rounds never overlap: a notification of our own create waits for its answer
        assert self._elect_task is not None
        await asyncio.shield(self._elect_task)

    async def close(self) -> None:
        """Stop taking part; the key goes with the session (the broker is shutting down)."""
        self._closed = True
        if self._elect_task is not None:
            self._elect_task.cancel()
            await asyncio.gather(self._elect_task, return_exceptions=True)
        if self.is_leader:
            try:  # hand over now instead of after the session closes; a best effort only:
                # when the metadata store is going down too, the session's end removes the key
                await asyncio.wait_for(self._store.delete(LEADER_PATH), HANDOVER_TIMEOUT_S)
            except (TimeoutError, MiniPulsarError):
                pass
            self._set_leader(False, None)

    def _notified(self, notification: Notification) -> None:
        if self._closed or notification.path != LEADER_PATH:
            return
        if notification.type is NotificationType.DELETED:
            self._set_leader(False, None)
        self.elect_soon()

    def _session_event(self, event: SessionEvent) -> None:
        if self._closed:
            return
        if event is SessionEvent.SESSION_LOST:
            self._set_leader(False, None)
        elif event in (SessionEvent.SESSION_REESTABLISHED, SessionEvent.RECONNECTED):
            self.elect_soon()  # reconnected: the leader's key may have gone unnoticed meanwhile

    def elect_soon(self) -> None:
        """Run one election round (at most one at a time; a request meanwhile runs another)."""
        if self._elect_task is not None and not self._elect_task.done():
            self._again = True
            return
        self._elect_task = spawn(self._elect_rounds(), name="leader election", logger=log)

    async def _elect_rounds(self) -> None:
        while True:
            self._again = False
            try:
                await self._elect()
            except MiniPulsarError as error:  # store unreachable: the session events bring us back
                log.info("leader election round failed: %s", error)
            if not self._again or self._closed:
                return

    async def _elect(self) -> None:
        if self._closed or self.is_leader:  # holding the key: notifications of our own create land here
            return
        try:
            await self._store.put(LEADER_PATH, self._value, expected_version=-1, ephemeral=True)
            self._set_leader(True, self.broker_id)
            return
        except AlreadyExistsError:
            pass
        found = await self._store.get(LEADER_PATH)
        if found is None:  # deleted between our create and read: the watch runs another round
            self._set_leader(False, None)
            return
        leader = _broker_id(found.value)
        if leader == self.broker_id:
            # ours from a create whose answer was lost, or a dead predecessor's on this address (a
            # live one would hold the port): either way no other broker leads — take it over
            try:
                await self._store.delete(LEADER_PATH, expected_version=found.version)
            except MiniPulsarError:
                pass
            self.elect_soon()
            return
        self._set_leader(False, leader)

    def _set_leader(self, is_leader: bool, leader: str | None) -> None:
        if leader is not None and leader != self.leader:
            self.leader_changes += 1
            log.info("load-manager leader is now %s%s", leader, " (this broker)" if is_leader else "")
        self.leader = leader
        if is_leader != self.is_leader:
            self.is_leader = is_leader
            self._on_change(is_leader)


def _broker_id(raw: bytes) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    broker_id = value.get("brokerId")
    return broker_id if isinstance(broker_id, str) else None
