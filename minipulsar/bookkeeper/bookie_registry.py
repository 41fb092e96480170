"""Which bookies exist, which are writable, and on which rack: the broker's cached picture of
``/ledgers/available`` (registrations, docs/design.md §4) and Pulsar's rack mapping at ``/bookies``.

The rack of a bookie comes from the rack mapping when it names the bookie (Pulsar's
``pulsar-admin bookies set-bookie-rack`` writes ``{"group": {"host:port": {"rack": "/r1"}}}``
there), else from the ``rack`` field of its registration, else ``/default-rack``.

Invariant: the cache is re-read before use whenever a watch notification or a session event
arrived since it was last read (a notification during a read marks it stale again), so a
placement decision never uses a registry older than the last change this broker was told of.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field

from minipulsar.errors import MiniPulsarError
from minipulsar.metadata.store import GetResult, MetadataStore, Notification, SessionEvent

log = logging.getLogger(__name__)

AVAILABLE_PATH = "/ledgers/available"
READONLY_NAME = "readonly"
READONLY_PATH = f"{AVAILABLE_PATH}/{READONLY_NAME}"
RACK_MAPPING_PATH = "/bookies"


@dataclass(frozen=True, slots=True)
class BookieSet:
    writable: frozenset[str] = frozenset()
    read_only: frozenset[str] = frozenset()
    racks: dict[str, str] = field(default_factory=dict)


def parse_rack_mapping(data: bytes) -> dict[str, str]:
    """Pulsar's ``/bookies`` JSON (group → bookie → info) as bookie → rack; bad JSON → {}."""
    try:
        groups = json.loads(data)
    except ValueError:
        log.warning("rack mapping at %s is not JSON; ignored", RACK_MAPPING_PATH)
        return {}
    racks: dict[str, str] = {}
    if isinstance(groups, dict):
        for bookies in groups.values():
            if isinstance(bookies, dict):
                for bookie, info in bookies.items():
                    if isinstance(info, dict) and isinstance(info.get("rack"), str):
                        racks[bookie] = info["rack"]
    return racks


class BookieRegistry:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._generation = 1
        """Bumped by every change notification; the cache is fresh when it was read at this one."""
        self._read_at_generation = 0
        self._cached = BookieSet()
        self._lock = asyncio.Lock()
        self._started = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._store.watch(AVAILABLE_PATH, self._changed)
        self._store.watch(RACK_MAPPING_PATH, self._changed)
        self._store.add_session_listener(self._session_event)

    def _changed(self, _: Notification) -> None:
        self._generation += 1

    def _session_event(self, _: SessionEvent) -> None:
        self._generation += 1  # notifications may have been missed while disconnected

    async def bookies(self) -> BookieSet:
        """The current registrations (re-read only if something changed)."""
        if self._read_at_generation == self._generation:
            return self._cached
        async with self._lock:
            while self._read_at_generation != self._generation:
                generation = self._generation
                self._cached = await self._read()
                self._read_at_generation = generation
        return self._cached

    async def _read(self) -> BookieSet:
        names = await self._store.children(AVAILABLE_PATH)
        writable = [name for name in names if name != READONLY_NAME]
        read_only = await self._store.children(READONLY_PATH) if READONLY_NAME in names else []
        racks = {}
        registrations = await asyncio.gather(*(self._registration(bookie) for bookie in writable))
        for bookie, registration in zip(writable, registrations):
            rack = _rack_from_registration(registration)
            if rack:
                racks[bookie] = rack
        try:
            mapping = await self._store.get(RACK_MAPPING_PATH)
        except MiniPulsarError as error:
            log.warning("cannot read the rack mapping: %s", error)
            mapping = None
        if mapping is not None:
            racks.update(parse_rack_mapping(mapping.value))
        return BookieSet(frozenset(writable), frozenset(read_only), racks)

    async def _registration(self, bookie: str) -> GetResult | None:
        """The bookie's registration; None when it is gone or cannot be read now (no rack from it)."""
        try:
            return await self._store.get(f"{AVAILABLE_PATH}/{bookie}")
        except MiniPulsarError:
            return None


def _rack_from_registration(registration: GetResult | None) -> str | None:
    if registration is None or not registration.value:
        return None
    try:
        rack = json.loads(registration.value).get("rack")
    except (ValueError, AttributeError):
        return None
    return rack if isinstance(rack, str) else None
