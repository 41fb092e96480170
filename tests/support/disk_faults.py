"""Real disk faults for tests: EIO from an ``LD_PRELOAD`` shim, ENOSPC from a small tmpfs.

**EIO** (:class:`EioShim`): ``tests/support/faultinject/eio_shim.c``, compiled with gcc into the
test's temp dir, makes ``write``/``pwrite``/``pwritev(2)``/``writev``/``fsync``/``fdatasync``/
``sync_file_range``/``fallocate``/``posix_fallocate`` fail with EIO for every file under a
path prefix while a control file exists — a failing disk for one process (this kernel has no
device-mapper). Reads, opens, renames and unlinks go through. To use it from any harness::

    shim = EioShim.build(tmp_dir)                  # pytest.skip()s when gcc is missing
    process.env.update(shim.env(prefix=ledger_dir)) # LD_PRELOAD + MINIPULSAR_FAULT_* vars
    process.start()
    shim.arm()            # from now on: EIO for files under ledger_dir (the control file exists)
    shim.arm(other_dir)   # or for other prefixes (one per line in the control file)
    shim.disarm()         # the control file is removed: every call goes through again

The variables are ``LD_PRELOAD`` (the built library), ``MINIPULSAR_FAULT_CONTROL`` (the control
file's path: absent, nothing fails; present and empty, the default prefix fails; present with
lines, each line is a prefix) and ``MINIPULSAR_FAULT_PREFIX`` (the default prefix). Prefixes are
resolved absolute paths, as ``/proc/self/fd`` shows them. The shim is read at every call, so one
process can be armed and disarmed any number of times.

**ENOSPC** (:func:`small_filesystem`): a tmpfs of a few MiB mounted over a test directory;
skipped with the reason when not root or the mount fails; always unmounted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SHIM_SOURCE = Path(__file__).parent / "faultinject" / "eio_shim.c"


@dataclass(frozen=True)
class EioShim:
    library: Path
    control: Path

    @classmethod
    def build(cls, directory: Path) -> EioShim:
        """Compile the shim into ``directory`` (skips the test when gcc is missing or fails)."""
        gcc = shutil.which("gcc")
        if gcc is None:
            pytest.skip("EIO injection needs gcc to build tests/support/faultinject/eio_shim.c")
        directory.mkdir(parents=True, exist_ok=True)
        library = directory / "eio_shim.so"
        result = subprocess.run(
            [gcc, "-shared", "-fPIC", "-O2", "-o", str(library), str(SHIM_SOURCE), "-ldl"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            pytest.skip(f"building the EIO shim failed: {result.stderr.strip()[:500]}")
        return cls(library, directory / "eio_shim.armed")

    def env(self, prefix: Path | str) -> dict[str, str]:
        """The environment of a process the shim applies to, ``prefix`` failing when armed."""
        return {
            "LD_PRELOAD": str(self.library),
            "MINIPULSAR_FAULT_CONTROL": str(self.control),
            "MINIPULSAR_FAULT_PREFIX": str(Path(prefix).resolve()),
        }

    def arm(self, *prefixes: Path | str) -> None:
        """EIO from now on under ``prefixes`` (none: the default prefix of :meth:`env`)."""
        text = "".join(f"{Path(p).resolve()}\n" for p in prefixes)
        staged = self.control.with_suffix(".staged")
        staged.write_text(text)
        staged.replace(self.control)  # atomic: the shim never reads a half-written list

    def disarm(self) -> None:
        self.control.unlink(missing_ok=True)


@contextlib.contextmanager
def small_filesystem(directory: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory`` (created), unmounted on exit.

    Skips the test with the reason when not root or when the mount fails."""
    if os.geteuid() != 0:
        pytest.skip("a small filesystem (ENOSPC) needs root to mount a tmpfs")
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs on {directory} failed: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def fill(directory: Path, name: str = "filler") -> Path:
    """Fill the filesystem holding ``directory`` with one file until ENOSPC; returns it (delete
    it to free the space)."""
    path = directory / name
    chunk = b"\0" * (64 << 10)
    with open(path, "wb", buffering=0) as file:
        with contextlib.suppress(OSError):
            while True:
                file.write(chunk)
    with contextlib.suppress(OSError), open(path, "ab", buffering=0) as file:
        while True:
            file.write(b"\0" * 512)
    return path
