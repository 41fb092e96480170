"""Checkpoints: up to where each journal is already held by the ledger storage (BookKeeper's lastMark).

A :class:`Checkpoint` holds one :class:`~bookie.journal.format.LogMark` per journal (index =
the journal's position in ``journalDirectories``). Invariants:

- a checkpoint is captured on the event loop at the instant the write-cache halves are
  swapped (:meth:`CheckpointSource.new_checkpoint`): every journal record before a mark has
  had its storage add run on the loop, so its entry sits in the half about to be flushed or
  in an earlier, already flushed one. (Not merely "fsynced": an add is durable in the journal
  before the loop puts it into the write cache.)
- it is persisted (:class:`LastMarkFile`, ``current/lastMark`` in every ledger dir) only after
  the flush made all those entries durable in entry logs + index; only then may a journal
  delete its segments wholly before the mark (:meth:`CheckpointSource.checkpoint_complete`);
- the file is replaced atomically (temp file, fsync, rename, fsync of the directory): a crash
  leaves the old checkpoint or the new one, never a mix;
- marks only move forward; reading takes the largest mark per journal over all ledger dirs
  (a crash between writing two dirs leaves one of them behind, which is merely older).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from minipulsar.bookie.journal.format import LogMark
from minipulsar.durable_file import write_atomically

log = logging.getLogger(__name__)

LAST_MARK_FILE = "lastMark"
_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    marks: tuple[LogMark | None, ...]
    """Per journal index; None: nothing of that journal is known to be in the storage."""

    def mark(self, journal_index: int) -> LogMark | None:
        return self.marks[journal_index] if journal_index < len(self.marks) else None

    def max(self, other: Checkpoint) -> Checkpoint:
        """The later mark of the two, journal by journal."""
        size = max(len(self.marks), len(other.marks))
        return Checkpoint(tuple(_later(self.mark(i), other.mark(i)) for i in range(size)))

    def __str__(self) -> str:
        return "[" + ", ".join("-" if m is None else str(m) for m in self.marks) + "]"


EMPTY_CHECKPOINT = Checkpoint(())


def _later(a: LogMark | None, b: LogMark | None) -> LogMark | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


class CheckpointSource(Protocol):
    """What the ledger storage needs from the journals (BookKeeper: ``CheckpointSource``)."""

    def new_checkpoint(self) -> Checkpoint:
        """On the event loop: every journal's position up to which all storage adds have run."""

    def checkpoint_complete(self, checkpoint: Checkpoint) -> None:
        """Blocking (flush thread): ``checkpoint`` is persisted; delete journal segments wholly before it."""


class LastMarkFile:
    """``<ledger dir>/current/lastMark``. Blocking I/O: call off the event loop."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LAST_MARK_FILE

    def read(self) -> Checkpoint:
        """The persisted checkpoint; empty when there is none yet.

        An unreadable file is a bug or outside damage (it is only ever renamed into place
        complete): it is reported, and treated as absent, which replays the journals from
        their start — slower, never wrong while the segments are there.
        """
        try:
            data = json.loads(self.path.read_bytes())
            if data.get("version") != _FORMAT_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            return Checkpoint(tuple(None if m is None else LogMark(int(m[0]), int(m[1])) for m in data["marks"]))
        except FileNotFoundError:
            return EMPTY_CHECKPOINT
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.error("%s is unreadable (%s): replaying the journals from their start", self.path, exc)
            return EMPTY_CHECKPOINT

    def write(self, checkpoint: Checkpoint) -> None:
        """Replace the file atomically and durably."""
        body = json.dumps(
            {"version": _FORMAT_VERSION, "marks": [None if m is None else list(m) for m in checkpoint.marks]}
        ).encode()
        write_atomically(self.path, body)


def read_last_mark(directories: list[Path]) -> Checkpoint:
    """The latest mark per journal over every ledger dir's lastMark file."""
    checkpoint = EMPTY_CHECKPOINT
    for directory in directories:
        checkpoint = checkpoint.max(LastMarkFile(directory).read())
    return checkpoint
