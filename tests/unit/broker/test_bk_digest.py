"""DigestManager: packaging and verification of entries, and the master key."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct

import pytest
from crc32c import crc32c

from minipulsar.bookkeeper.digest import (
    DIGEST_LENGTH,
    METADATA_LENGTH,
    DigestManager,
    DigestMismatchError,
    DigestType,
    generate_master_key,
)
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata

ALL_TYPES = list(DigestType)
FIELD_OFFSETS = {"ledger_id": 0, "entry_id": 8, "lac": 16, "length": 24}


@pytest.mark.parametrize("digest_type", ALL_TYPES)
def test_round_trip(digest_type: DigestType) -> None:
    """Goal: what package() wraps, verify() unwraps, with the header's LAC and length."""
    digest = DigestManager(7, digest_type, b"secret")
    for payload in (b"", b"x", bytes(range(256)) * 40):
        data = digest.package(3, 2, 1000, payload)
        assert len(data) == METADATA_LENGTH + DIGEST_LENGTH[digest_type] + len(payload)
        assert digest.verify(3, data) == payload
        entry = digest.verify_entry(3, data)
        assert (entry.lac, entry.length, entry.payload) == (2, 1000, payload)


@pytest.mark.parametrize("digest_type", [t for t in ALL_TYPES if t is not DigestType.DUMMY])
@pytest.mark.parametrize("field", [*FIELD_OFFSETS, "digest", "payload"])
def test_one_changed_byte_is_a_mismatch(digest_type: DigestType, field: str) -> None:
    """Goal: every field is covered. Method: flip one byte of each field in turn (the ledger
    and entry ids get a matching reader, so the digest is what must catch it)."""
    digest = DigestManager(7, digest_type, b"secret")
    data = bytearray(digest.package(3, 2, 1000, b"payload bytes"))
    offset = {
        **FIELD_OFFSETS,
        "digest": METADATA_LENGTH,
        "payload": METADATA_LENGTH + DIGEST_LENGTH[digest_type] + 4,
    }[field]
    data[offset + 7 if field in FIELD_OFFSETS else offset] ^= 0x01
    ledger_id, entry_id = struct.unpack_from(">qq", data)
    with pytest.raises(DigestMismatchError):
        DigestManager(ledger_id, digest_type, b"secret").verify(entry_id, bytes(data))


@pytest.mark.parametrize("digest_type", ALL_TYPES)
def test_another_entry_or_ledger_is_a_mismatch(digest_type: DigestType) -> None:
    """Goal: intact bytes of another entry (or ledger) are never returned for this one."""
    data = DigestManager(7, digest_type).package(3, 2, 10, b"abc")
    with pytest.raises(DigestMismatchError):
        DigestManager(7, digest_type).verify(4, data)
    with pytest.raises(DigestMismatchError):
        DigestManager(8, digest_type).verify(3, data)


@pytest.mark.parametrize("digest_type", ALL_TYPES)
def test_short_or_unwrapped_bytes_are_a_mismatch(digest_type: DigestType) -> None:
    digest = DigestManager(7, digest_type)
    for data in (b"", b"plain payload", bytes(METADATA_LENGTH + DIGEST_LENGTH[digest_type] - 1)):
        with pytest.raises(DigestMismatchError):
            digest.verify(0, data)


def test_mac_depends_on_the_password() -> None:
    data = DigestManager(1, DigestType.MAC, b"right").package(0, -1, 1, b"a")
    with pytest.raises(DigestMismatchError):
        DigestManager(1, DigestType.MAC, b"wrong").verify(0, data)


def test_layout_is_bookkeepers() -> None:
    """Goal: the bytes are BookKeeper's v3 layout: 4 longs, the digest over them and the payload."""
    metadata = struct.pack(">qqqq", 7, 3, 2, 1000)
    data = DigestManager(7, DigestType.CRC32C).package(3, 2, 1000, b"hello")
    assert data == metadata + struct.pack(">I", crc32c(b"hello", crc32c(metadata))) + b"hello"
    mac_key = hashlib.sha1(b"mac" + b"pw").digest()
    mac = hmac.new(mac_key, metadata + b"hello", hashlib.sha1).digest()
    assert DigestManager(7, DigestType.MAC, b"pw").package(3, 2, 1000, b"hello") == metadata + mac + b"hello"


def test_master_key() -> None:
    """BookKeeper's generateMasterKey: SHA-1("ledger" + password); the empty password too."""
    assert generate_master_key(b"pw") == hashlib.sha1(b"ledgerpw").digest()
    assert generate_master_key(b"") == hashlib.sha1(b"ledger").digest()
    assert DigestManager(1, DigestType.CRC32C, b"pw").master_key == generate_master_key(b"pw")


def test_ledger_metadata_keeps_digest_type_and_password() -> None:
    """Goal: digest type and password round-trip through the stored metadata (as BookKeeper's
    ``digestType``/``password``), and metadata written without them reads as the defaults."""
    metadata = LedgerMetadata(
        ledger_id=5,
        ensemble_size=2,
        write_quorum=2,
        ack_quorum=1,
        ensembles=((0, ("a:1", "b:1")),),
        digest_type=DigestType.MAC,
        password=b"\x00pw\xff",
    )
    stored = json.loads(metadata.to_bytes())
    assert stored["digestType"] == "MAC" and base64.b64decode(stored["password"]) == b"\x00pw\xff"
    back = LedgerMetadata.from_bytes(5, metadata.to_bytes(), 3)
    assert (back.digest_type, back.password) == (DigestType.MAC, b"\x00pw\xff")
    assert back.digest_manager().master_key == generate_master_key(b"\x00pw\xff")
    del stored["digestType"], stored["password"]
    old = LedgerMetadata.from_bytes(5, json.dumps(stored).encode(), 3)
    assert (old.digest_type, old.password) == (DigestType.CRC32C, b"")
