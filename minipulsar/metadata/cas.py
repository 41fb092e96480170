"""A compare-and-set whose answer a dropped connection hid, resolved by reading the key back.

Every backend fails a conditional put cut off by a lost connection with
:class:`~minipulsar.errors.ConnectionClosedError`: it may or may not have been applied
(docs/design.md §4.1). A writer that retries blindly at the version it knew gets
``BadVersion`` from its own write and takes itself for fenced; one that gives up leaves its
state unpersisted for good. :func:`put_resolving` tells the cases apart for a key its caller
writes alone (a cursor, a managed ledger's info): after the failure — or a ``BadVersion`` on
a later attempt — it reads the key:

- at the version the put would have made (``expected_version + 1``; 0 for a create) and
  holding exactly the bytes written: the put was applied; its :class:`Stat` is returned;
- unchanged (at ``expected_version``, or absent for a create): it was not; it is put again;
- anything else: another writer changed the key; the put's own error is raised
  (``BadVersionError`` / ``AlreadyExistsError``), as a plain put would have.

Invariant: never reports success for bytes that are not stored at the returned version, and
never overwrites a version it did not expect. A failed read back raises the original error
(the caller retries later; its next attempt resolves the same way).
"""

from __future__ import annotations

from minipulsar.errors import AlreadyExistsError, BadVersionError, ConnectionClosedError
from minipulsar.metadata.store import NOT_EXISTS, MetadataStore, Stat

ATTEMPTS = 3


async def put_resolving(store: MetadataStore, path: str, value: bytes, expected_version: int) -> Stat:
    """``store.put(path, value, expected_version)`` (``expected_version`` >= -1), with an
    unknown outcome resolved as the module docstring says.

    Raises:
        BadVersionError / AlreadyExistsError: another writer changed the key.
        ConnectionClosedError: still unknown after the read back failed, or after
            :data:`ATTEMPTS` puts that were not applied.
    """
    value = bytes(value)
    applied_version = 0 if expected_version == NOT_EXISTS else expected_version + 1
    for _ in range(ATTEMPTS):
        try:
            return await store.put(path, value, expected_version)
        except (ConnectionClosedError, BadVersionError, AlreadyExistsError) as error:  # maybe our own lost answer
            try:
                current = await store.get(path)
            except ConnectionClosedError:
                raise error from None
            if current is not None and current.version == applied_version and current.value == value:
                return current.stat
            unchanged = (
                current is None
                if expected_version == NOT_EXISTS
                else (current is not None and current.version == expected_version)
            )
            if not isinstance(error, ConnectionClosedError):
                raise
            if not unchanged:  # what the put would have answered, had its answer come
                if expected_version == NOT_EXISTS:
                    raise AlreadyExistsError(f"{path} exists (created by another writer)") from error
                raise BadVersionError(f"{path} is not at version {expected_version} (another writer)") from error
    raise ConnectionClosedError(f"{path}: {ATTEMPTS} writes cut off by a dropped connection")
