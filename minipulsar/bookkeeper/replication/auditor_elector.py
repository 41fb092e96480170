"""The auditor election (BookKeeper's ``AuditorElector`` over ``ZkLedgerAuditorManager``): each
AutoRecovery process votes with an ephemeral key ``auditorelection/V_{seq}``; the lowest
sequence number is the auditor.

A vote is a sequential key (:meth:`MetadataStore.create_sequential`: ZooKeeper's sequential
znode; on the other backends the election node's value is the next sequence number, taken by
compare-and-set), so two votes never share a number.

Invariants:

- at most one process runs the Auditor at a time while the store's sessions are live: it runs
  only while its own vote is the lowest, and a vote goes with its session;
- when the auditor's session dies its vote disappears, the others see the change and the next
  lowest takes over; a process whose session was lost stops its Auditor at once and votes
  again on a new session.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from minipulsar.bookkeeper.replication import metrics
from minipulsar.bookkeeper.replication.paths import ELECTION_PATH, VOTE_PREFIX, parse_vote
from minipulsar.errors import MiniPulsarError
from minipulsar.metadata.store import MetadataStore, Notification, SessionEvent
from minipulsar.supervision import spawn

log = logging.getLogger(__name__)

RETRY_S = 1.0
VOTE_DELETE_TIMEOUT_S = 2.0
"""How long a stop waits to withdraw its vote (a store that does not answer: the vote goes
with the session instead, and the stop is not held up)."""


async def votes(store: MetadataStore) -> list[tuple[int, str]]:
    """``(sequence, vote name)`` of every live vote, lowest first."""
    names = await store.children(ELECTION_PATH)
    parsed = [(parse_vote(name), name) for name in names]
    return sorted((seq, name) for seq, name in parsed if seq is not None)


async def who_is_auditor(store: MetadataStore) -> str | None:
    """The id of the process whose vote is lowest (BookKeeper's ``getCurrentAuditor``)."""
    for _, name in await votes(store):
        result = await store.get(f"{ELECTION_PATH}/{name}")
        if result is not None:
            try:
                return str(json.loads(result.value)["bookieId"])
            except (ValueError, KeyError, TypeError):
                return None
    return None


class AuditorElector:
    def __init__(
        self,
        store: MetadataStore,
        my_id: str,
        elected: Callable[[], None],
        unelected: Callable[[], Awaitable[None]],
    ) -> None:
        """``elected`` starts the Auditor; ``unelected`` stops it."""
        self._store = store
        self._my_id = my_id
        self._elected = elected
        self._unelected = unelected
        self._my_vote: str | None = None
        self.is_auditor = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        assert self._task is None, "the elector is started once"
        self._store.watch(ELECTION_PATH, self._election_changed)
        self._store.add_session_listener(self._session_event)
        self._changed.set()
        self._task = spawn(self._run(), name="AuditorElector", logger=log)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._step_down()
        vote, self._my_vote = self._my_vote, None
        if vote is not None:
            try:
                async with asyncio.timeout(VOTE_DELETE_TIMEOUT_S):
                    await self._store.delete(f"{ELECTION_PATH}/{vote}")
            except (MiniPulsarError, TimeoutError) as error:  # gone with the session, or the store is down
                log.debug("auditor elector: vote %s not deleted: %r", vote, error)

    def _election_changed(self, _: Notification) -> None:
        self._changed.set()

    def _session_event(self, event: SessionEvent) -> None:
        if event is SessionEvent.SESSION_LOST:
            self._my_vote = None  # gone with the session
        self._changed.set()

    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self._elect()
            except MiniPulsarError as error:
                log.warning("auditor election: %s; trying again", error)
                await asyncio.sleep(RETRY_S)
                self._changed.set()

    async def _elect(self) -> None:
        if self._my_vote is None or not await self._store.exists(f"{ELECTION_PATH}/{self._my_vote}"):
            await self._step_down()
            await self._vote()
        current = await votes(self._store)
        lowest = current[0][1] if current else None
        if lowest == self._my_vote and not self.is_auditor:
            log.info("auditor election: %s is the auditor (vote %s)", self._my_id, self._my_vote)
            self.is_auditor = True
            self._elected()
        elif lowest != self._my_vote:
            await self._step_down()

    async def _vote(self) -> None:
        metrics.ELECTION_ATTEMPTS.inc()
        body = json.dumps({"bookieId": self._my_id}).encode()
        path = await self._store.create_sequential(f"{ELECTION_PATH}/{VOTE_PREFIX}", body, ephemeral=True)
        self._my_vote = path.rsplit("/", 1)[1]

    async def _step_down(self) -> None:
        if self.is_auditor:
            self.is_auditor = False
            log.info("auditor election: %s is no longer the auditor", self._my_id)
            await self._unelected()
