"""What a power cut keeps: the durability model behind faultfs, on a plain directory tree.

Every change goes straight to the backing directory (write-through), and the model keeps an
undo log of what is not durable yet; :meth:`DurabilityModel.power_cut` applies it, leaving
the backing directory as a disk would be found after losing power at that instant. The
model is strict POSIX, as FoundationDB's non-durable file simulation is, with no help from
any real file system's habits (ext4 committing a new file's directory entry with its data):

- **File data and size.** A write or a truncate is durable once the file is ``fsync``'d or
  ``fdatasync``'d (through any descriptor of it, ``RWF_DSYNC``/``O_DSYNC`` included: the
  kernel turns those into an fsync request). Both make data *and* size durable (Linux's
  ``fdatasync`` writes the size when reading the data back needs it, and that is every case
  a replay can observe). Until then the undo log holds the file's durable size and the old
  bytes of every range written below it; the cut truncates (or zero-extends) the file back
  to that size and puts the old bytes back. Data is tracked per inode, so a rename or an
  unlink does not change what a later fsync of the open file makes durable.
- **Directory entries.** A create (``open(O_CREAT)``, ``mknod``, ``symlink``, ``link``),
  ``mkdir``, ``unlink``, ``rmdir`` and ``rename`` are durable once every directory whose entries
  they changed (both parents of a rename) is fsynced *after* them. A file's own fsync does
  not make its name durable. Until then an unlinked (or renamed-over) file waits in a hidden
  graveyard in the backing dir (:data:`GRAVEYARD`), so a cut can put it back. The cut reverts
  pending entry changes newest first: a created file or dir is removed (a dir with whatever
  is inside it, as its contents are unreachable without its entry), an unlinked file comes
  back, a rename goes back.
- **Not modelled:** renaming a directory that has pending changes below it (their paths are
  recorded before the rename), extended attributes, modes and times (passed through and
  treated as durable), ``sync_file_range`` (the kernel does not pass it to a FUSE file
  system; minipulsar does not use it), and writes that reached the device out of order
  within one unsynced range (a cut drops all of an unsynced range, never part of it: tearing
  is what :mod:`tests.support.faultfs.damage` does, offline).

The backing directory itself is never fsynced: the host does not lose power here, so what
counts as durable is what this model says, not what the host's disk holds.

Thread-safety: none; the FUSE layer calls every method under one lock.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
from dataclasses import dataclass, field

PAGE_BYTES = 4096
"""The unit a partial cut keeps or drops (the page cache's, which is what a disk is handed)."""
GRAVEYARD = ".faultfs-graveyard"
"""Hidden directory in the backing root: files unlinked (or renamed over) while that change
is not durable yet. Never visible through the mount."""


@dataclass
class PowerCutReport:
    """What a cut reverted."""

    files_reverted: int = 0
    """Inodes with unsynced data or size changes."""
    bytes_restored: int = 0
    """Old bytes put back below a file's durable size."""
    bytes_dropped: int = 0
    """Bytes beyond a file's durable size cut off."""
    entries_reverted: int = 0
    """Directory-entry changes undone (creates, unlinks, renames, mkdirs, rmdirs)."""
    unrevertible: list[str] = field(default_factory=list)
    """Entry changes that could not be undone (a later durable change removed what they need)."""
    reverted: list[str] = field(default_factory=list)
    """One line per file and entry change reverted (for the test's log)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "files_reverted": self.files_reverted,
            "bytes_restored": self.bytes_restored,
            "bytes_dropped": self.bytes_dropped,
            "entries_reverted": self.entries_reverted,
            "unrevertible": list(self.unrevertible),
            "reverted": list(self.reverted),
        }


@dataclass
class _FileState:
    """One inode with changes not durable yet; ``fd`` is the model's own read-write descriptor."""

    fd: int
    durable_size: int
    undo: list[tuple[int, bytes]] = field(default_factory=list)
    """(offset, old bytes) per write/truncate below ``durable_size``, oldest first."""


@dataclass
class _EntryChange:
    kind: str
    """create | mkdir | unlink | rmdir | rename"""
    path: str
    """The real path created, removed, or renamed to."""
    dirs: set[str]
    """Real paths of the directories still to be fsynced for this change to be durable."""
    source: str | None = None
    """rename: the real path renamed from."""
    grave: str | None = None
    """unlink, rename over an existing file: where the removed file waits."""


class DurabilityModel:
    """The backing directory and its undo log (see the module docstring). Paths given to the
    methods are the mount's (``/a/b``); :meth:`real` maps them into the backing dir."""

    def __init__(self, backing: str) -> None:
        self.root = os.path.abspath(backing)
        self.graveyard = os.path.join(self.root, GRAVEYARD)
        shutil.rmtree(self.graveyard, ignore_errors=True)  # left by a fs process that died: all unlinked
        os.makedirs(self.graveyard)
        self._files: dict[int, _FileState] = {}
        self._pending: list[_EntryChange] = []
        self._graves = itertools.count()
        self.cut = False
        self.syncs = 0
        self.dir_syncs = 0

    def real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    @staticmethod
    def hidden(path: str) -> bool:
        """The graveyard, which the mount never shows."""
        return path.lstrip("/").split("/", 1)[0] == GRAVEYARD

    # -- file data ------------------------------------------------------------------------------

    def _state(self, fd: int) -> _FileState:
        ino = os.fstat(fd).st_ino
        state = self._files.get(ino)
        if state is None:
            own = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)  # the same inode, readable and writable
            state = self._files[ino] = _FileState(own, os.fstat(own).st_size)
        return state

    def _save(self, state: _FileState, offset: int, end: int) -> None:
        end = min(end, state.durable_size)
        if offset < end:
            state.undo.append((offset, os.pread(state.fd, end - offset, offset)))

    def write(self, fd: int, data: bytes, offset: int) -> int:
        self._save(self._state(fd), offset, offset + len(data))
        return os.pwrite(fd, data, offset)

    def truncate(self, fd: int, length: int) -> None:
        state = self._state(fd)
        size = os.fstat(fd).st_size
        if length < size:
            self._save(state, length, size)
        os.ftruncate(fd, length)

    def fsync(self, fd: int) -> None:
        """``fsync``/``fdatasync`` of an open file: its data and size are durable."""
        self.syncs += 1
        state = self._files.pop(os.fstat(fd).st_ino, None)
        if state is not None:
            os.close(state.fd)

    # -- directory entries ----------------------------------------------------------------------

    def _change(self, kind: str, path: str, *dirs: str, source: str | None = None, grave: str | None = None) -> None:
        self._pending.append(_EntryChange(kind, path, set(dirs), source, grave))

    def _bury(self, real: str) -> str:
        grave = os.path.join(self.graveyard, str(next(self._graves)))
        os.rename(real, grave)
        return grave

    def created(self, path: str, kind: str = "create") -> None:
        """``path`` was just created (a file, symlink, hard link or node; ``kind="mkdir"``: a dir)."""
        real = self.real(path)
        self._change(kind, real, os.path.dirname(real))

    def unlink(self, path: str) -> None:
        real = self.real(path)
        if os.path.isdir(real) and not os.path.islink(real):
            raise IsADirectoryError(real)
        self._change("unlink", real, os.path.dirname(real), grave=self._bury(real))

    def rmdir(self, path: str) -> None:
        real = self.real(path)
        os.rmdir(real)
        self._change("rmdir", real, os.path.dirname(real))

    def rename(self, old: str, new: str) -> None:
        source, target = self.real(old), self.real(new)
        if os.path.lexists(target) and os.path.samefile(source, target):
            return  # POSIX: renaming a file to one of its own names does nothing
        grave = None
        if os.path.lexists(target):
            target_is_dir = os.path.isdir(target) and not os.path.islink(target)
            if target_is_dir and (not os.path.isdir(source) or os.listdir(target)):
                os.rename(source, target)  # let the OS refuse it with its own error
                raise AssertionError("rename over a directory must have failed")
            grave = self._bury(target)
        try:
            os.rename(source, target)
        except OSError:
            if grave is not None:
                os.rename(grave, target)
            raise
        self._change("rename", target, os.path.dirname(source), os.path.dirname(target), source=source, grave=grave)

    def fsyncdir(self, path: str) -> None:
        """The directory's entries are durable: every change before this one that only
        waited for this directory is now durable too."""
        self.dir_syncs += 1
        real = self.real(path).rstrip("/") or "/"
        still = []
        for change in self._pending:
            change.dirs.discard(real)
            if change.dirs:
                still.append(change)
            elif change.grave is not None:
                _remove(change.grave)
        self._pending = still

    # -- the cut --------------------------------------------------------------------------------

    def pending(self) -> dict[str, int]:
        """How much a cut now would revert (without reverting it)."""
        return {
            "files": len(self._files),
            "undo_bytes": sum(len(old) for state in self._files.values() for _, old in state.undo),
            "entries": len(self._pending),
        }

    def power_cut(self, keep_probability: float = 0.0, rng: random.Random | None = None) -> PowerCutReport:
        """Revert every change that is not durable; the model refuses everything afterwards.

        ``keep_probability`` > 0: a disk that wrote back some of what was never synced, as
        a real one may have (FoundationDB's simulation does the same): each unsynced 4 KiB
        page keeps its newest bytes with that probability (else its durable ones; a page past
        the durable size that is not kept reads as zeros if a later one is kept, which sets
        the size), and the pending entry changes keep a prefix (a journaled file system
        commits them in order), each one past the durable ones kept with that probability
        until the first that is not."""
        assert not self.cut, "power was cut already"
        assert keep_probability == 0.0 or rng is not None, "a partial cut needs its seeded rng"
        report = PowerCutReport()
        for state in self._files.values():
            if keep_probability > 0.0:
                assert rng is not None
                self._revert_pages(state, report, keep_probability, rng)
            else:
                self._revert_data(state, report)
            os.close(state.fd)
        self._files.clear()
        kept = 0
        while kept < len(self._pending) and rng is not None and rng.random() < keep_probability:
            kept += 1
        for change in reversed(self._pending[kept:]):
            try:
                _revert_entry(change)
                report.entries_reverted += 1
                report.reverted.append(f"{change.kind} {os.path.relpath(change.path, self.root)}")
            except OSError as exc:
                report.unrevertible.append(f"{change.kind} {change.path}: {exc}")
        self._pending.clear()
        shutil.rmtree(self.graveyard, ignore_errors=True)
        self.cut = True
        return report

    def _name(self, state: _FileState) -> str:
        return os.path.relpath(os.readlink(f"/proc/self/fd/{state.fd}"), self.root)

    def _revert_data(self, state: _FileState, report: PowerCutReport) -> None:
        dropped = max(0, os.fstat(state.fd).st_size - state.durable_size)
        os.ftruncate(state.fd, state.durable_size)
        for offset, old in reversed(state.undo):  # newest first: the oldest bytes win
            os.pwrite(state.fd, old, offset)
        restored = sum(len(old) for _, old in state.undo)
        report.files_reverted += 1
        report.bytes_dropped += dropped
        report.bytes_restored += restored
        report.reverted.append(
            f"{self._name(state)}: {dropped} bytes past {state.durable_size} dropped, {restored} restored"
        )

    def _revert_pages(self, state: _FileState, report: PowerCutReport, keep: float, rng: random.Random) -> None:
        """The partial cut of one file (see :meth:`power_cut`)."""
        size, durable = os.fstat(state.fd).st_size, state.durable_size
        dirty = sorted({page for offset, old in state.undo for page in _pages(offset, offset + len(old))})
        restored = reverted_pages = 0
        for page in dirty:  # below the durable size: newest bytes, or the durable ones
            if rng.random() < keep:
                continue
            start, end = page * PAGE_BYTES, min((page + 1) * PAGE_BYTES, durable)
            data = bytearray(os.pread(state.fd, end - start, start).ljust(end - start, b"\0"))
            for offset, old in reversed(state.undo):
                lo, hi = max(offset, start), min(offset + len(old), end)
                if lo < hi:
                    data[lo - start : hi - start] = old[lo - offset : hi - offset]
            os.pwrite(state.fd, bytes(data), start)
            restored += end - start
            reverted_pages += 1
        grown = list(_pages(durable, size))
        kept_pages = {page for page in grown if rng.random() < keep}
        new_size = max([durable] + [min(size, (page + 1) * PAGE_BYTES) for page in kept_pages])
        os.ftruncate(state.fd, new_size)
        for page in grown:
            start, end = max(durable, page * PAGE_BYTES), min(new_size, (page + 1) * PAGE_BYTES)
            if page not in kept_pages and start < end:
                os.pwrite(state.fd, bytes(end - start), start)  # a hole: allocated, never written
        report.files_reverted += 1
        report.bytes_dropped += size - new_size
        report.bytes_restored += restored
        report.reverted.append(
            f"{self._name(state)}: partly: size {size} -> {new_size} (durable {durable}), "
            f"{len(kept_pages)}/{len(grown)} new pages and {len(dirty) - reverted_pages}/{len(dirty)} "
            "rewritten pages kept"
        )

    def close(self) -> None:
        for state in self._files.values():
            os.close(state.fd)
        self._files.clear()


def _pages(start: int, end: int) -> range:
    """The page numbers that bytes ``[start, end)`` touch."""
    return range(start // PAGE_BYTES, -(-end // PAGE_BYTES)) if start < end else range(0)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _revert_entry(change: _EntryChange) -> None:
    if change.kind in ("create", "mkdir"):
        if not os.path.lexists(change.path):
            raise FileNotFoundError(change.path)
        _remove(change.path)
    elif change.kind == "unlink":
        assert change.grave is not None
        os.rename(change.grave, change.path)
    elif change.kind == "rmdir":
        os.mkdir(change.path)
    elif change.kind == "rename":
        assert change.source is not None
        os.rename(change.path, change.source)
        if change.grave is not None:
            os.rename(change.grave, change.path)
    else:
        raise AssertionError(change.kind)
