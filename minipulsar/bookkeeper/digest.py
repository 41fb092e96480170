"""Entry digests and the ledger master key (BookKeeper's ``DigestManager`` family).

The writer wraps every entry before sending it to the bookies; the bookies store the wrapped
bytes opaquely; every reader verifies and unwraps them. The wrapped entry is::

    ledger_id i64 | entry_id i64 | lac i64 | length i64 | digest | payload
    \\__________________ METADATA_LENGTH (32) ________/

``lac`` is the writer's last-add-confirmed when it packaged the entry, ``length`` the ledger's
payload length *including* this entry (so the last entry tells a ledger's length, which
recovery uses). The digest covers the 32 metadata bytes, then the payload:

- ``CRC32C`` (the default, as Pulsar's ``managedLedgerDigestType``): 4 bytes, big-endian;
- ``CRC32``: zlib's CRC32, 8 bytes (BookKeeper stores it as a long);
- ``MAC``: HMAC-SHA1 keyed by SHA-1(b"mac" + password), 20 bytes — exactly BookKeeper's
  ``MacDigestManager`` (HMAC-SHA1 is still a sound MAC; keeping BookKeeper's choice keeps its
  20-byte layout and lets a ledger's password alone open it);
- ``DUMMY``: no digest (0 bytes); the metadata is still checked.

The master key a writer presents to bookies (ADD_ENTRY, fencing reads) is SHA-1(b"ledger" +
password), BookKeeper's ``DigestManager.generateMasterKey``; the empty password gives
SHA-1(b"ledger"), BookKeeper's ``EMPTY_LEDGER_KEY``.

Invariants:

- :meth:`DigestManager.verify` returns a payload only if the digest matches *and* the ledger
  and entry ids in the header are the ones asked for; anything else raises
  :class:`DigestMismatchError` (counted as ``READ_ENTRY_DM`` by the readers);
- one digest computation per entry on each side; packaging the head (:meth:`DigestManager.package_head`)
  never copies the payload (:meth:`DigestManager.package` joins them, for tests and cold paths),
  verification copies it once (the slice that becomes the returned payload).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
import zlib
from typing import NamedTuple

from crc32c import crc32c

from minipulsar.errors import MiniPulsarError

METADATA = struct.Struct(">qqqq")
"""ledger_id, entry_id, lac, length."""
METADATA_LENGTH = METADATA.size
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_unpack_metadata = METADATA.unpack_from


class DigestType(str, enum.Enum):
    """How entries of a ledger are checksummed (BookKeeper's ``DigestType``; Pulsar's
    ``managedLedgerDigestType`` values)."""

    CRC32 = "CRC32"
    CRC32C = "CRC32C"
    MAC = "MAC"
    DUMMY = "DUMMY"


DIGEST_LENGTH = {DigestType.CRC32: 8, DigestType.CRC32C: 4, DigestType.MAC: 20, DigestType.DUMMY: 0}
"""Bytes of the digest after the metadata, by type."""


class DigestMismatchError(MiniPulsarError):
    """An entry's bytes do not match their digest, or are not the entry asked for
    (BookKeeper's ``BKDigestMatchException``). Never sent on the wire: the reader tries the
    next replica."""


class VerifiedEntry(NamedTuple):
    """A verified entry: what its header says, and its payload."""

    lac: int
    length: int
    """The ledger's payload length up to and including this entry."""
    payload: bytes


def generate_master_key(password: bytes) -> bytes:
    """The master key of a ledger with ``password``: SHA-1(b"ledger" + password), 20 bytes."""
    return hashlib.sha1(b"ledger" + password).digest()


class DigestManager:
    """Packages and verifies the entries of one ledger."""

    __slots__ = ("_digest", "_mac_key", "digest_length", "digest_type", "ledger_id", "master_key")

    def __init__(self, ledger_id: int, digest_type: DigestType = DigestType.CRC32C, password: bytes = b"") -> None:
        self.ledger_id = ledger_id
        self.digest_type = digest_type
        self.digest_length = DIGEST_LENGTH[digest_type]
        self.master_key = generate_master_key(password)
        self._mac_key = hashlib.sha1(b"mac" + password).digest()
        self._digest = {
            DigestType.CRC32C: self._crc32c,
            DigestType.CRC32: self._crc32,
            DigestType.MAC: self._mac,
            DigestType.DUMMY: self._dummy,
        }[digest_type]

    def package(self, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
        """The bytes to send to the bookies for ``payload`` (``length``: the ledger's payload
        bytes including this entry)."""
        return self.package_head(entry_id, lac, length, payload) + payload

    def package_head(self, entry_id: int, lac: int, length: int, payload: bytes | memoryview) -> bytes:
        """What goes before ``payload`` in the wrapped entry: the metadata and the digest. The
        writer sends it and the payload as two buffers, so packaging never copies a payload."""
        metadata = METADATA.pack(self.ledger_id, entry_id, lac, length)
        return metadata + self._digest(metadata, payload)

    def verify(self, entry_id: int, data: bytes) -> bytes:
        """The payload of ``data``, the wrapped bytes of entry ``entry_id`` as a bookie returned them.

        Raises:
            DigestMismatchError: the bytes are corrupt, or another entry's.
        """
        return self.verify_entry(entry_id, data).payload

    def verify_entry(self, entry_id: int, data: bytes) -> VerifiedEntry:
        """:meth:`verify`, with the LAC and ledger length the header holds (ledger recovery).

        Raises:
            DigestMismatchError: the bytes are corrupt, or another entry's.
        """
        start = METADATA_LENGTH + self.digest_length
        if len(data) < start:
            raise DigestMismatchError(
                f"ledger {self.ledger_id} entry {entry_id}: {len(data)} bytes, shorter than the "
                f"{start}-byte header of a {self.digest_type.value} entry"
            )
        view = memoryview(data)
        if self._digest(view[:METADATA_LENGTH], view[start:]) != view[METADATA_LENGTH:start]:
            raise DigestMismatchError(f"ledger {self.ledger_id} entry {entry_id}: digest mismatch")
        ledger_id, stored_entry_id, lac, length = _unpack_metadata(data)
        if ledger_id != self.ledger_id or stored_entry_id != entry_id:
            raise DigestMismatchError(
                f"ledger {self.ledger_id} entry {entry_id}: the bytes are of ledger {ledger_id} entry {stored_entry_id}"
            )
        return VerifiedEntry(lac, length, data[start:])

    # -- the digests: (metadata, payload) -> digest bytes ----------------------------------------

    @staticmethod
    def _crc32c(metadata: bytes | memoryview, payload: bytes | memoryview) -> bytes:
        return _U32.pack(crc32c(payload, crc32c(metadata)))

    @staticmethod
    def _crc32(metadata: bytes | memoryview, payload: bytes | memoryview) -> bytes:
        return _U64.pack(zlib.crc32(payload, zlib.crc32(metadata)))

    def _mac(self, metadata: bytes | memoryview, payload: bytes | memoryview) -> bytes:
        mac = hmac.new(self._mac_key, metadata, hashlib.sha1)
        mac.update(payload)
        return mac.digest()

    @staticmethod
    def _dummy(metadata: bytes | memoryview, payload: bytes | memoryview) -> bytes:
        return b""


__all__ = [
    "DIGEST_LENGTH",
    "METADATA_LENGTH",
    "DigestManager",
    "DigestMismatchError",
    "DigestType",
    "VerifiedEntry",
    "generate_master_key",
]
