"""The directory of one journal's segments: listing and replaying them in order, trimming the
old ones, and the segment files as the writer thread sees them (:class:`JournalFiles`): the
one appended to, the next one created ahead of time, the preallocation thread that prepares
both, and the trim thread that deletes the old ones.

Invariants:
- segments are replayed in id order; only the last one written to (:func:`tail_scan`) may
  end torn (a crash mid-write), any other damage is reported as lost data;
- only the writer thread appends, opens and rolls (:meth:`JournalFiles.open`,
  :meth:`JournalFiles.after_write`); appending never resumes below the replay's end;
- segments roll at ``journalMaxSizeMB`` after a group, never inside one; the next segment is
  created (and preallocated) on the preallocation thread once the current one is half full,
  so a roll is a file switch; at most one segment exists ahead of the current one;
- trimming deletes only segments wholly before a persisted checkpoint's mark, which the
  current segment never is: it is safe beside the writer, on the trim thread. With
  ``journalReuseFiles`` it keeps up to :data:`RECYCLED_SEGMENTS_KEPT` of them for the next
  segments to be written over (a full segment ends with an END record, so a replay of its
  reuse stops where the new data does).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import time
from pathlib import Path

from minipulsar import diagnostics
from minipulsar.bookie import metrics
from minipulsar.bookie.direct_io import StagingBuffers
from minipulsar.bookie.journal.format import (
    SEGMENT_HEADER_SIZE,
    SEGMENT_VERSION,
    LogMark,
    ScanEnd,
    parse_segment_file_name,
    segment_file_name,
)
from minipulsar.bookie.journal.segment import (
    RECYCLED_SUFFIX,
    Preallocator,
    SegmentScan,
    SegmentWriter,
    list_recycled,
    scan_segment,
    segment_path,
)
from minipulsar.bookie.journal.settings import JournalSettings
from minipulsar.bookie.journal.stats import JournalStats
from minipulsar.durable_file import make_dirs

log = logging.getLogger("minipulsar.bookie.journal")  # one name for the whole journal's log lines

RECYCLED_SEGMENTS_KEPT = 2
"""journalReuseFiles: trimmed segment files kept for reuse (each up to journalMaxSizeMB)."""


def list_segments(directory: Path) -> list[int]:
    """Segment ids in ``directory``, oldest first."""
    ids = (parse_segment_file_name(name) for name in os.listdir(directory))
    return sorted(i for i in ids if i is not None)


def replay_directory(directory: Path, visit, start: LogMark | None = None) -> list[SegmentScan]:
    """Scan the segments of ``directory`` in order from ``start``; ``visit(segment_id, scanned_record)``.

    ``start`` (a checkpoint's mark) skips every segment before ``start.segment_id`` and the
    bytes of that segment before ``start.offset``: what they hold is already in the ledger
    storage. A segment whose data ends torn or corrupt is reported and the scan goes on with
    the next segment: only the last segment written to (:func:`tail_scan`) can legitimately
    end torn (a crash mid-write); anything else is logged as lost data.
    """
    scans = []
    segment_ids = [s for s in list_segments(directory) if start is None or s >= start.segment_id]
    for segment_id in segment_ids:
        offset = start.offset if start is not None and segment_id == start.segment_id else SEGMENT_HEADER_SIZE
        scan = scan_segment(
            segment_path(directory, segment_id), segment_id, lambda item, sid=segment_id: visit(sid, item), offset
        )
        scans.append(scan)
    tail = tail_scan(scans)
    for scan in scans:
        if not scan.header_ok:
            log.warning("journal %s: segment %x has no valid header; skipped", directory, scan.segment_id)
        elif scan.end is ScanEnd.STALE and (scan is tail or scan.empty):
            log.debug(
                "journal %s: reused segment %x ends at offset %d after %d records",
                directory,
                scan.segment_id,
                scan.end_offset,
                scan.records,
            )
        elif scan.end is not ScanEnd.CLEAN:
            is_tail = scan is tail
            (log.info if is_tail else log.warning)(
                "journal %s: segment %x ends %s at offset %d after %d records%s",
                directory,
                scan.segment_id,
                scan.end.value,
                scan.end_offset,
                scan.records,
                " (a crash mid-write; the tail is discarded)" if is_tail else "",
            )
    return scans


def tail_scan(scans: list[SegmentScan]) -> SegmentScan | None:
    """The last segment written to: the last one that is not merely an empty segment created
    ahead of time (or a file without a header, never made durable)."""
    for scan in reversed(scans):
        if scan.header_ok and not scan.empty:
            return scan
    return None


def delete_segments_before(directory: Path, segment_id: int, keep_for_reuse: int = 0) -> list[int]:
    """Delete every segment file whose id is below ``segment_id``; returns the ids deleted.

    Used once a checkpoint made everything before a mark durable in the ledger storage: those
    segments lie wholly before the mark. The segment holding the mark (and any later one,
    including the one being appended to) is never touched. ``keep_for_reuse``
    (journalReuseFiles): up to that many of them are renamed for reuse instead
    (:func:`take_recycled`); the newest are kept, being the most likely to be whole.
    """
    old_ids = [old for old in list_segments(directory) if old < segment_id]
    room = max(0, keep_for_reuse - len(list_recycled(directory)))
    recycle = set(old_ids[len(old_ids) - room :]) if room else set()
    deleted = []
    for old in old_ids:
        try:
            if old in recycle:
                os.rename(segment_path(directory, old), directory / f"{segment_file_name(old)}{RECYCLED_SUFFIX}")
            else:
                os.unlink(segment_path(directory, old))
        except FileNotFoundError:
            continue
        deleted.append(old)
    return deleted


def trim_segments(directory: Path, mark: LogMark | None, keep_for_reuse: int = 0) -> list[int]:
    """Delete the segments of ``directory`` wholly before ``mark`` (keeping up to
    ``keep_for_reuse`` files for reuse); blocking. Returns their ids."""
    if mark is None:
        return []
    deleted = delete_segments_before(directory, mark.segment_id, keep_for_reuse)
    if deleted:
        log.info("journal %s: deleted %d segment(s) before checkpoint %s", directory, len(deleted), mark)
    return deleted


class JournalFiles:
    """One journal directory's segments, and the two helper threads that prepare and delete
    them. Created on the loop when the journal starts; used by its writer thread."""

    def __init__(self, directory: Path, index: int, settings: JournalSettings, stats: JournalStats) -> None:
        self.directory = directory
        self.index = index
        self.settings = settings
        self.stats = stats
        self.current: SegmentWriter | None = None
        """The segment appended to (set by :meth:`open`, switched by a roll)."""
        self.next_writer: concurrent.futures.Future | None = None
        """The next segment, being created ahead of time (see :meth:`after_write`)."""
        self._preallocator = Preallocator(f"journal-prealloc-{index}")
        self._trimmer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"journal-trim-{index}")
        self.staging = StagingBuffers(keep=1)
        """The direct writes' staging buffer, handed from each segment to the next (a segment
        created ahead of time takes one while the current one still has its own)."""
        self._drop_cache = settings.remove_from_page_cache and settings.sync_data
        """Only synced pages are clean, which is what lets the kernel free them at once."""

    # -- opening: where appending resumes ------------------------------------------------------

    def open(self, applied_mark: LogMark | None, replay_scans: list[SegmentScan]) -> None:
        """On the writer thread: open (or create) the segment to append to, after the replay
        that ended at ``applied_mark`` and scanned ``replay_scans``."""
        make_dirs(self.directory)
        self.current = self._open_writer(applied_mark, replay_scans)

    def _open_writer(self, applied_mark: LogMark | None, replay_scans: list[SegmentScan]) -> SegmentWriter:
        settings = self.settings
        segment_ids = list_segments(self.directory)
        # Never append below the replay's end: records there would sit before a checkpoint
        # mark and be skipped by the next replay (only reachable if segments were removed
        # by hand, but then new ones start after the mark).
        floor = applied_mark.segment_id if applied_mark is not None else 0
        if not segment_ids or segment_ids[-1] < floor:
            return self._create_segment(max(floor, segment_ids[-1] if segment_ids else 0) + 1)
        last = segment_ids[-1]
        scans = {scan.segment_id: scan for scan in replay_scans}
        scan = scans.get(last) or scan_segment(segment_path(self.directory, last), last, lambda _: None)
        if not scan.header_ok:
            # Created but never made durable with a header: it holds no record.
            os.unlink(segment_path(self.directory, last))
            return self._create_segment(last)
        if scan.end_offset >= settings.max_segment_bytes or scan.version != SEGMENT_VERSION:
            return self._create_segment(last + 1)  # full, or of an older format: never mix checksums
        if scan.empty and len(segment_ids) > 1:
            self._cut_torn_tail(scans.get(segment_ids[-2]))
        return SegmentWriter.reopen(
            self.directory,
            scan,
            settings.prealloc_bytes,
            self._preallocator,
            settings.max_segment_bytes,
            self._drop_cache,
            settings.direct_io,
            staging=self.staging,
        )

    def _cut_torn_tail(self, scan: SegmentScan | None) -> None:
        """Appending resumes in an empty segment created ahead of time: cut the damaged tail
        the previous one may have (a crash mid-write), as reopening it would have, so that no
        later replay reports it as lost data."""
        if scan is None or not scan.header_ok or scan.end is ScanEnd.CLEAN:
            return
        fd = os.open(segment_path(self.directory, scan.segment_id), os.O_RDWR)
        try:
            os.ftruncate(fd, scan.end_offset)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _create_segment(self, segment_id: int) -> SegmentWriter:
        started = time.monotonic()
        settings = self.settings
        writer = SegmentWriter.create(
            self.directory,
            segment_id,
            settings.prealloc_bytes,
            self._preallocator,
            settings.max_segment_bytes,
            self._drop_cache,
            settings.direct_io,
            reuse=settings.reuse_files,
            staging=self.staging,
        )
        metrics.JOURNAL_CREATION_LATENCY.observe((time.monotonic() - started) * 1000)
        return writer

    # -- rolling over: after each group ---------------------------------------------------------

    def after_write(self) -> None:
        """Create the next segment ahead of time once this one is half full; roll when full.

        Raises:
            OSError: the roll failed; the journal cannot append any more.
        """
        writer = self.current
        assert writer is not None
        limit = self.settings.max_segment_bytes
        if self.next_writer is None and writer.position >= limit // 2:
            self.next_writer = self._preallocator.submit(self._create_next_segment, writer.segment_id + 1)
        if writer.position >= limit:
            self._roll(writer)

    def _create_next_segment(self, segment_id: int) -> SegmentWriter:
        """On the preallocation thread: the segment the next roll switches to (the part of a
        rollover that touches the disk, logged as such)."""
        started = time.monotonic()
        log.info("journal %s: rolling over ahead of time: creating segment %x", self.directory, segment_id)
        writer = self._create_segment(segment_id)
        log.info(
            "journal %s: created segment %x ahead of time in %.1f ms",
            self.directory,
            segment_id,
            (time.monotonic() - started) * 1000,
        )
        return writer

    def _roll(self, writer: SegmentWriter) -> None:
        """Close the full segment (synced) and switch to the next one."""
        started = time.monotonic()
        log.info(
            "journal %s: rolling over from segment %x at %d bytes", self.directory, writer.segment_id, writer.position
        )
        writer.end()
        if not self.settings.sync_data:
            writer.sync()
        writer.close()
        self.current = self._take_next_segment(writer.segment_id + 1)
        self.stats.rolls += 1
        diagnostics.record("journal_roll", (time.monotonic() - started) * 1000, t=started)
        log.info(
            "journal %s: rolled over to segment %x in %.1f ms",
            self.directory,
            self.current.segment_id,
            (time.monotonic() - started) * 1000,
        )

    def _take_next_segment(self, segment_id: int) -> SegmentWriter:
        """The segment created ahead of time (waiting for it if need be), else a new one now."""
        next_writer, self.next_writer = self.next_writer, None
        if next_writer is not None:
            try:
                return next_writer.result()
            except OSError as exc:
                log.warning(
                    "journal %s: creating segment %x ahead of time failed (%s); retrying",
                    self.directory,
                    segment_id,
                    exc,
                )
                segment_path(self.directory, segment_id).unlink(missing_ok=True)
        return self._create_segment(segment_id)

    # -- trimming and closing -------------------------------------------------------------------

    def trim_soon(self, mark: LogMark | None) -> None:
        """:func:`trim_segments` on the trim thread, or here once it has stopped. Unlinking a
        full 2 GiB segment keeps the kernel busy ~0.5 s here: not on the ledger storage's
        flush thread, whose next flush the adds may be waiting for."""
        try:
            self._trimmer.submit(self._trim_logged, mark)
        except RuntimeError:  # the journal has stopped (the storage's last checkpoint): here, now
            self._trim_logged(mark)

    def _trim_logged(self, mark: LogMark | None) -> None:
        try:
            trim_segments(self.directory, mark, RECYCLED_SEGMENTS_KEPT if self.settings.reuse_files else 0)
        except OSError as exc:  # retried by the next checkpoint
            log.warning("journal %s: deleting segments before %s failed: %s", self.directory, mark, exc)

    def close(self) -> None:
        """Close the current segment and stop both helper threads; a segment created ahead of
        time is kept (valid and empty: the next start appends to it)."""
        if self.current is not None:
            self.current.close()
        self._preallocator.close()
        self._trimmer.shutdown(wait=True)
        next_writer, self.next_writer = self.next_writer, None
        if next_writer is not None and not next_writer.cancelled() and next_writer.exception() is None:
            next_writer.result().close()
        self.staging.close()
