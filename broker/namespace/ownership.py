"""Bundle ownership: ephemeral keys ``/namespace/{tenant}/{ns}/0xLLLLLLLL_0xHHHHHHHH``.

The key's value is Pulsar's ``NamespaceEphemeralData`` JSON — the owner's binary and HTTP URLs and
a ``disabled`` flag set while the bundle is being unloaded. The owner is whoever created the key;
it vanishes with the owner's metadata session, so a dead broker's bundles become unowned once
its session expires.

This broker's own bundles are kept in :class:`OwnershipCache` too. Invariants:

- a bundle is in ``owned`` only while this broker holds its key (created it in this session:
  a create answered after a session loss that began before it is not an ownership);
- ``ACTIVE`` → topics may load and serve; ``UNLOADING`` → the key says disabled, nothing new attaches;
- a key naming this broker's URLs that is not in ``owned`` belongs to an earlier session of a
  broker on the same address (restarted before its old session expired); that process is gone,
  so :meth:`OwnershipCache.try_acquire` deletes the key and takes the bundle.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass

from minipulsar.broker.namespace.bundles import NamespaceBundle
from minipulsar.errors import AlreadyExistsError, BadVersionError, NotFoundError, ServiceNotReadyError
from minipulsar.metadata import MetadataStore

log = logging.getLogger(__name__)

OWNERSHIP_ROOT = "/namespace"


def ownership_path(bundle: NamespaceBundle) -> str:
    return f"{OWNERSHIP_ROOT}/{bundle.namespace}/{bundle.range.name}"


@dataclass(frozen=True, slots=True)
class OwnerData:
    """Pulsar's ``NamespaceEphemeralData``."""

    native_url: str
    """The owner's binary service URL, ``pulsar://host:port``."""
    http_url: str
    """The owner's web service URL, ``http://host:port`` (admin REST, HTTP lookup)."""
    disabled: bool = False

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "nativeUrl": self.native_url,
                "nativeUrlTls": "",
                "httpUrl": self.http_url,
                "httpUrlTls": "",
                "disabled": self.disabled,
                "advertisedListeners": {},
            }
        ).encode()

    @classmethod
    def from_json(cls, value: bytes) -> OwnerData | None:
        try:
            data = json.loads(value)
            return cls(str(data["nativeUrl"]), str(data.get("httpUrl", "")), bool(data.get("disabled", False)))
        except (ValueError, KeyError, TypeError):
            return None

    def same_broker(self, other: OwnerData) -> bool:
        return self.native_url == other.native_url


class BundleState(enum.Enum):
    ACTIVE = "active"
    UNLOADING = "unloading"


@dataclass(slots=True)
class OwnedBundle:
    bundle: NamespaceBundle
    version: int
    """The ownership key's version as this broker last wrote it."""
    state: BundleState = BundleState.ACTIVE


class OwnershipCache:
    """This broker's ownership keys, and reads of everyone's."""

    def __init__(self, store: MetadataStore, me: OwnerData) -> None:
        self._store = store
        self.me = me
        self.owned: dict[str, OwnedBundle] = {}
        """Bundle name → what this broker owns (see the module invariants)."""
        self._sessions_lost = 0
        """Bumped by :meth:`forget_all`: a create answered after a session loss it started before
        made a key of the lost session (gone, or about to go), never an ownership."""

    async def owner(self, bundle: NamespaceBundle) -> tuple[OwnerData, int] | None:
        """The current owner and the key's version, or None when the bundle is unowned."""
        found = await self._store.get(ownership_path(bundle))
        if found is None:
            return None
        data = OwnerData.from_json(found.value)
        if data is None:  # unreadable: treat as owned by nobody we can reach, but do not steal it
            data = OwnerData("", "", disabled=True)
        return data, found.version

    async def try_acquire(self, bundle: NamespaceBundle) -> OwnerData:
        """Create the ownership key; returns ``self.me`` when this broker now owns ``bundle``, else
        the data of the broker that does (a race lost to it, or a key this broker did not see)."""
        path = ownership_path(bundle)
        sessions_lost = self._sessions_lost
        for _ in range(3):
            try:
                stat = await self._store.put(path, self.me.to_json(), -1, ephemeral=True)
                if self._sessions_lost != sessions_lost:
                    raise ServiceNotReadyError(f"{bundle}: the metadata session was lost while acquiring it")
            except AlreadyExistsError:
                current = await self.owner(bundle)
                if current is None:
                    continue  # released meanwhile: try again
                data, version = current
                if data.same_broker(self.me) and bundle.name not in self.owned:
                    log.info("%s: deleting the ownership key of an earlier session on this address", bundle)
                    try:
                        await self._store.delete(path, version)
                    except (NotFoundError, BadVersionError):
                        pass
                    continue
                return data
            self.owned[bundle.name] = OwnedBundle(bundle, stat.version)
            log.info("acquired ownership of %s", bundle)
            return self.me
        current = await self.owner(bundle)
        return current[0] if current is not None else OwnerData("", "", disabled=True)

    async def disable(self, owned: OwnedBundle) -> None:
        """Mark the key disabled (lookups then answer "being unloaded"); UNLOADING locally."""
        owned.state = BundleState.UNLOADING
        disabled = OwnerData(self.me.native_url, self.me.http_url, disabled=True)
        try:
            stat = await self._store.put(ownership_path(owned.bundle), disabled.to_json(), owned.version)
            owned.version = stat.version
        except (NotFoundError, BadVersionError) as error:  # the key went with our session: nothing to flag
            log.warning("%s: cannot flag the ownership key disabled: %s", owned.bundle, error)

    async def release(self, owned: OwnedBundle) -> None:
        """Delete the key (if still ours) and forget the bundle."""
        self.owned.pop(owned.bundle.name, None)
        try:
            await self._store.delete(ownership_path(owned.bundle), owned.version)
        except (NotFoundError, BadVersionError) as error:
            log.warning("%s: ownership key already gone or replaced: %s", owned.bundle, error)
        log.info("released ownership of %s", owned.bundle)

    async def remove_dead(self, bundle: NamespaceBundle, version: int) -> None:
        """Delete another broker's key, at ``version``, once that broker is known to be gone."""
        try:
            await self._store.delete(ownership_path(bundle), version)
        except (NotFoundError, BadVersionError):
            pass  # gone already, or rewritten by a live owner: the next read decides

    def forget_all(self) -> list[OwnedBundle]:
        """The metadata session ended: every key went with it. Returns what was owned."""
        lost = list(self.owned.values())
        self.owned.clear()
        self._sessions_lost += 1
        return lost

    def owning(self, namespace: str, hash_value: int) -> OwnedBundle | None:
        """This broker's bundle of ``namespace`` containing ``hash_value`` (any state), or None."""
        for owned in self.owned.values():
            if owned.bundle.namespace == namespace and owned.bundle.range.contains(hash_value):
                return owned
        return None
