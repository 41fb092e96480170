"""Snapshot files of the metastore: the whole key tree as of one transaction id.

A snapshot is ``snapshot.<txid as 16 hex digits>`` in the data dir::

    b"MPSNAP1\\n" | uint64 BE body length | uint32 BE crc32(body) | body (msgpack)

with ``body = {"txid": T, "tree": KeyTree.export()}``. It is written atomically: a temp file,
fsync, rename over the final name, fsync of the directory. So a snapshot file either does
not exist or is complete (a bad CRC means the disk lied, and recovery refuses it).

Blocking file I/O: call these from the WAL writer thread or ``asyncio.to_thread``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import msgpack

from minipulsar.durable_file import TEMP_SUFFIX, write_atomically
from minipulsar.metadata.tree import KeyTree
from minipulsar.protocol.codec import MSGPACK_SHAPE_ERRORS

SNAPSHOT_BODY_ERRORS: tuple[type[Exception], ...] = (*MSGPACK_SHAPE_ERRORS, KeyError)

MAGIC = b"MPSNAP1\n"
_HEADER = struct.Struct(">QI")
PREFIX = "snapshot."
TMP_SUFFIX = TEMP_SUFFIX


class CorruptSnapshotError(Exception):
    """A snapshot file that does not decode: wrong magic, short body or bad CRC."""


def file_name(prefix: str, txid: int) -> str:
    return f"{prefix}{txid:016x}"


def list_files(data_dir: Path, prefix: str) -> list[tuple[int, Path]]:
    """``(txid, path)`` of every ``<prefix><hex txid>`` file in ``data_dir``, by txid."""
    found = []
    for path in data_dir.iterdir():
        name = path.name
        if not name.startswith(prefix) or name.endswith(TMP_SUFFIX):
            continue
        try:
            found.append((int(name[len(prefix) :], 16), path))
        except ValueError:
            continue
    return sorted(found)


def encode(tree: KeyTree, txid: int) -> bytes:
    """The snapshot file's bytes; cheap enough to call on the event loop for small trees."""
    body: bytes = msgpack.packb({"txid": txid, "tree": tree.export()}, use_bin_type=True)
    return MAGIC + _HEADER.pack(len(body), zlib.crc32(body)) + body


def decode(data: bytes) -> tuple[KeyTree, int]:
    """``(tree, txid)`` from a snapshot file's bytes.

    Raises:
        CorruptSnapshotError: anything that is not a complete, checksummed snapshot.
    """
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _HEADER.size:
        raise CorruptSnapshotError("not a metastore snapshot (bad magic or too short)")
    length, crc = _HEADER.unpack_from(data, len(MAGIC))
    body = data[len(MAGIC) + _HEADER.size :]
    if len(body) != length or zlib.crc32(body) != crc:
        raise CorruptSnapshotError(f"body of {len(body)} bytes fails its length/CRC check")
    try:
        content: dict[str, Any] = msgpack.unpackb(body, raw=False)
        return KeyTree.restore(content["tree"]), int(content["txid"])
    except SNAPSHOT_BODY_ERRORS as exc:  # a CRC-valid body of a foreign or newer format
        raise CorruptSnapshotError(f"snapshot body does not decode: {exc!r}") from exc


def write(data_dir: Path, txid: int, data: bytes) -> Path:
    """Atomically write ``data`` (from :func:`encode`) as the snapshot of ``txid``."""
    final = data_dir / file_name(PREFIX, txid)
    write_atomically(final, data)  # via a TMP_SUFFIX file, which listing skips
    return final


def read(path: Path) -> tuple[KeyTree, int]:
    return decode(path.read_bytes())
