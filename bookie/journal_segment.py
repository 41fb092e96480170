"""Journal segment files: listing, replay, and the one segment being appended to.

Blocking file I/O only: every function here runs on the journal's writer thread or, at start,
on a worker thread, never on the event loop.

Invariants of :class:`SegmentWriter`:
- ``position`` is the end of the valid records; every byte from ``position`` to the end of
  the file is zero (fresh preallocation, or truncated and re-zeroed when the segment is
  reopened after a crash), so a replay stops exactly at ``position``;
- the file is zero-filled ahead of ``position`` in ``prealloc_bytes`` chunks: an fdatasync
  then only flushes data, not a growing file size (~2x faster here than a growing file);
- a new segment file and its directory entry are fsynced before the first record goes in.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bookie.journal_format import (
    SEGMENT_HEADER_SIZE,
    LogMark,
    ScanEnd,
    ScannedRecord,
    decode_segment_header,
    encode_segment_header,
    parse_segment_file_name,
    scan_records,
    segment_file_name,
)

log = logging.getLogger(__name__)

_ZEROS = bytes(1024 * 1024)
_READ_BUFFER_BYTES = 1024 * 1024


def list_segments(directory: Path) -> list[int]:
    """Segment ids in ``directory``, oldest first."""
    ids = (parse_segment_file_name(name) for name in os.listdir(directory))
    return sorted(i for i in ids if i is not None)


def segment_path(directory: Path, segment_id: int) -> Path:
    return directory / segment_file_name(segment_id)


@dataclass(slots=True)
class SegmentScan:
    """The outcome of replaying one segment."""

    segment_id: int
    end_offset: int
    """End of the valid records: where an append must go."""
    end: ScanEnd
    records: int
    header_ok: bool


def scan_segment(path: Path, segment_id: int, visit, start_offset: int = SEGMENT_HEADER_SIZE) -> SegmentScan:
    """Call ``visit(scanned_record)`` for each valid record of one segment from ``start_offset``
    (a record boundary: the header's end, or a checkpoint mark), in order."""
    with open(path, "rb", buffering=_READ_BUFFER_BYTES) as stream:
        if decode_segment_header(stream.read(SEGMENT_HEADER_SIZE)) != segment_id:
            return SegmentScan(segment_id, 0, ScanEnd.CORRUPT, 0, header_ok=False)
        start_offset = max(start_offset, SEGMENT_HEADER_SIZE)
        stream.seek(start_offset)
        offset, records = start_offset, 0
        for item in scan_records(stream, start_offset):
            if isinstance(item, ScannedRecord):
                visit(item)
                offset = item.payload_offset + len(item.payload)
                records += 1
            else:
                return SegmentScan(segment_id, offset, item, records, header_ok=True)
    raise AssertionError("scan_records always ends with a ScanEnd")


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SegmentWriter:
    """The segment currently appended to. Owned by one thread."""

    def __init__(self, directory: Path, segment_id: int, fd: int, position: int, prealloc_bytes: int) -> None:
        self.directory = directory
        self.segment_id = segment_id
        self._fd = fd
        self.position = position
        self._prealloc_bytes = prealloc_bytes
        self._allocated = os.fstat(fd).st_size

    @classmethod
    def create(cls, directory: Path, segment_id: int, prealloc_bytes: int) -> SegmentWriter:
        """A new, empty segment, durable (file and directory entry) before it is used."""
        path = segment_path(directory, segment_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, encode_segment_header(segment_id))
        writer = cls(directory, segment_id, fd, SEGMENT_HEADER_SIZE, prealloc_bytes)
        writer._preallocate(SEGMENT_HEADER_SIZE + 1)
        os.fsync(fd)
        fsync_directory(directory)
        return writer

    @classmethod
    def reopen(cls, directory: Path, scan: SegmentScan, prealloc_bytes: int) -> SegmentWriter:
        """Append to an existing segment after its last valid record.

        Whatever follows that record (a torn record, garbage, stale zeros) is cut off and the
        tail zero-filled again, so the next replay cannot read past our own records.
        """
        assert scan.header_ok
        fd = os.open(segment_path(directory, scan.segment_id), os.O_RDWR)
        os.ftruncate(fd, scan.end_offset)
        writer = cls(directory, scan.segment_id, fd, scan.end_offset, prealloc_bytes)
        writer._preallocate(scan.end_offset + 1)
        os.fsync(fd)
        return writer

    def _preallocate(self, needed_end: int) -> None:
        """Zero-fill the file up to at least ``needed_end``, in ``prealloc_bytes`` steps."""
        if not self._prealloc_bytes or self._allocated >= needed_end:
            return
        step = self._prealloc_bytes
        target = -(-needed_end // step) * step  # file sizes stay multiples of the step
        offset = self._allocated
        while offset < target:
            offset += os.pwrite(self._fd, _ZEROS[: min(len(_ZEROS), target - offset)], offset)
        self._allocated = target

    def append(self, buffers: list[bytes]) -> int:
        """Write ``buffers`` at ``position`` (no sync); returns the offset they start at.

        Growing the preallocation is itself fsynced here when it happens, so that a later
        fdatasync only has data to flush.
        """
        size = sum(len(b) for b in buffers)
        start = self.position
        if self._prealloc_bytes and self._allocated < start + size:
            self._preallocate(start + size)
            os.fsync(self._fd)
        data = buffers[0] if len(buffers) == 1 else b"".join(buffers)
        view, written = memoryview(data), 0
        while written < size:
            written += os.pwrite(self._fd, view[written:], start + written)
        self.position = start + size
        return start

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def replay_directory(directory: Path, visit, start: LogMark | None = None) -> list[SegmentScan]:
    """Scan the segments of ``directory`` in order from ``start``; ``visit(segment_id, scanned_record)``.

    ``start`` (a checkpoint's mark) skips every segment before ``start.segment_id`` and the
    bytes of that segment before ``start.offset``: what they hold is already in the ledger
    storage. A segment whose data ends torn or corrupt is reported and the scan goes on with
    the next segment: only the very last segment can legitimately end torn (a crash
    mid-write); anything else is logged as lost data.
    """
    scans = []
    segment_ids = [s for s in list_segments(directory) if start is None or s >= start.segment_id]
    for segment_id in segment_ids:
        offset = start.offset if start is not None and segment_id == start.segment_id else SEGMENT_HEADER_SIZE
        scan = scan_segment(segment_path(directory, segment_id), segment_id,
                            lambda item, sid=segment_id: visit(sid, item), offset)
        scans.append(scan)
        if not scan.header_ok:
            log.warning("journal %s: segment %x has no valid header; skipped", directory, segment_id)
        elif scan.end is not ScanEnd.CLEAN:
            is_last = segment_id == segment_ids[-1]
            (log.info if is_last else log.warning)(
                "journal %s: segment %x ends %s at offset %d after %d records%s", directory, segment_id,
                scan.end.value, scan.end_offset, scan.records,
                " (a crash mid-write; the tail is discarded)" if is_last else "")
    return scans


def delete_segments_before(directory: Path, segment_id: int) -> list[int]:
    """Delete every segment file whose id is below ``segment_id``; returns the ids deleted.

    Used once a checkpoint made everything before a mark durable in the ledger storage: those
    segments lie wholly before the mark. The segment holding the mark (and any later one,
    including the one being appended to) is never touched.
    """
    deleted = []
    for old in list_segments(directory):
        if old >= segment_id:
            break
        try:
            os.unlink(segment_path(directory, old))
        except FileNotFoundError:
            continue
        deleted.append(old)
    return deleted
