"""An operator's read-only choice, kept across restarts (BookKeeper's ``persistBookieStatusEnabled``).

With the key on, ``PUT /api/v1/bookie/state/readonly`` also writes a ``BOOKIE_STATUS`` file
(``<layout version>,<READ_ONLY|READ_WRITE>,<epoch ms>``, BookKeeper's format) into every
ledger dir's ``current/``, and a restarted bookie that finds READ_ONLY as the newest status
starts read-only, as the operator left it, before it registers.

BookKeeper persists every transition, the disk monitor's too; here only the operator's choice
is kept: full ledger dirs are found again at start anyway, and a status written by the disk
monitor would keep a bookie read-only after its disk was cleaned.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from minipulsar.durable_file import write_atomically

log = logging.getLogger(__name__)

STATUS_FILE = "BOOKIE_STATUS"
LAYOUT_VERSION = 1
READ_ONLY, READ_WRITE = "READ_ONLY", "READ_WRITE"


def write_status(ledger_dirs: list[Path], read_only: bool) -> None:
    """Write the status into every ledger dir's ``current/`` (blocking); a dir that cannot
    take it is logged and skipped: the others still hold it."""
    line = f"{LAYOUT_VERSION},{READ_ONLY if read_only else READ_WRITE},{int(time.time() * 1000)}\n".encode()
    written = 0
    for directory in ledger_dirs:
        try:
            write_atomically(directory / "current" / STATUS_FILE, line)
            written += 1
        except OSError as exc:
            log.warning("could not write %s into %s: %s", STATUS_FILE, directory, exc)
    if not written:
        log.error(
            "the bookie status (%s) was written into no ledger dir: a restart will not keep it",
            READ_ONLY if read_only else READ_WRITE,
        )


def read_status(ledger_dirs: list[Path]) -> bool | None:
    """The newest status found: True for read-only, False for read-write, None when no dir
    holds a readable one."""
    newest: tuple[int, bool] | None = None
    for directory in ledger_dirs:
        path = directory / "current" / STATUS_FILE
        try:
            version, mode, updated_ms = path.read_text().strip().split(",")
            if int(version) != LAYOUT_VERSION or mode not in (READ_ONLY, READ_WRITE):
                raise ValueError(f"unknown layout {version} or mode {mode}")
            status = (int(updated_ms), mode == READ_ONLY)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            log.warning("ignoring %s: %s", path, exc)
            continue
        if newest is None or status[0] > newest[0]:
            newest = status
    return None if newest is None else newest[1]
