"""faultfs: a FUSE file system that can lose power, for tests that need more than SIGKILL.

A SIGKILL keeps the page cache, so it never tests whether an acknowledgement waited for
``fdatasync``. faultfs runs as its own process, passes everything through to a backing dir,
and tracks what is not durable yet (unsynced writes and truncates; creates, unlinks and
renames until their directory is fsynced: the exact model is :mod:`.model`'s docstring). A
power cut reverts all of it in the backing dir, as a disk would be found after losing power,
and the file system then fails every operation with EIO until it is unmounted.

Use::

    reason = unavailable_reason()          # None, or why faultfs cannot run here (pytest.skip it)
    fs = mount(backing_dir, mountpoint)    # the process runs; mountpoint shows backing_dir
    ...                                    # run the process under test on mountpoint
    report = fs.power_cut()                # dict: files_reverted, bytes_restored, bytes_dropped,
                                           # entries_reverted, unrevertible, reverted (lines)
    # or fs.power_cut(keep_probability=0.5, seed=s): some unsynced pages made it to the disk
    fs.unmount()                           # the backing dir now holds only what was durable
    damage.tear_tail(path, n) / damage.flip_bits(path, rng, n)   # offline, on the backing dir
    fs = mount(backing_dir, mountpoint)    # again, for the restart

Kill the process under test *before* the cut (its in-flight writes are unsynced anyway): the
cut then stands for a power loss at the moment of the kill. :meth:`FaultFs.unmount` is
idempotent, and a :class:`FaultFs` is a context manager that unmounts on exit.

Needs root, ``/dev/fuse``, libfuse2 and fusepy: :func:`unavailable_reason` installs libfuse2
with apt-get when it is missing and says what else is.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.apt import apt_install
from tests.support.faultfs import damage

__all__ = ["FaultFs", "damage", "mount", "skip_unless_available", "unavailable_reason"]

REPO_ROOT = Path(__file__).resolve().parents[3]
MOUNT_TIMEOUT_S = 20.0
CONTROL_TIMEOUT_S = 30.0
UNMOUNT_TIMEOUT_S = 10.0


def _mounted(mountpoint: Path) -> bool:
    """``mountpoint`` is in the mount table (``os.path.ismount`` cannot tell once the fs
    fails every operation, its own root's stat included)."""
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts if len(line.split()) > 1)


def _libfuse_present() -> bool:
    return ctypes.util.find_library("fuse") is not None


def unavailable_reason() -> str | None:
    """Why faultfs cannot run on this machine, or None when it can (libfuse2 is installed
    with apt-get first when it is missing and we are root)."""
    if not sys.platform.startswith("linux"):
        return "faultfs needs Linux (FUSE)"
    if os.geteuid() != 0:
        return "faultfs needs root (to mount FUSE file systems)"
    if not os.path.exists("/dev/fuse"):
        return "faultfs needs /dev/fuse"
    if not _libfuse_present():
        apt_install(["fuse", "libfuse2"], _libfuse_present)
    if not _libfuse_present() or shutil.which("fusermount") is None:
        return "faultfs needs libfuse2 and fusermount (apt-get install fuse libfuse2 failed)"
    try:
        import fuse  # type: ignore[import-untyped]  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"faultfs needs fusepy (the test extra): {exc}"
    return None


class FaultFs:
    """One mounted faultfs (see the module docstring)."""

    def __init__(self, backing: Path, mountpoint: Path, process: subprocess.Popen[bytes], control: Path) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.process = process
        self._control = control
        self.log_path = control.parent / "faultfs.log"

    def _command(self, command: str) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONTROL_TIMEOUT_S)
            sock.connect(str(self._control))
            sock.sendall(command.encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError(f"faultfs closed the control socket answering {command!r}")
                answer += chunk
        reply: dict[str, Any] = json.loads(answer)
        if not reply.get("ok"):
            raise RuntimeError(f"faultfs {command!r}: {reply}")
        return reply

    def pending(self) -> dict[str, Any]:
        """What a cut would revert now (and how many fsyncs the fs has seen)."""
        return self._command("pending")

    def power_cut(self, keep_probability: float = 0.0, seed: int = 0) -> dict[str, Any]:
        """Revert every change not durable yet; the mount fails all I/O from now on.

        ``keep_probability`` > 0: a partial cut, as a disk that wrote back some unsynced pages
        (and a prefix of the unsynced directory changes) before losing power; ``seed`` picks
        which (see :meth:`.model.DurabilityModel.power_cut`)."""
        return self._command(f"cut {keep_probability!r} {seed}")

    def unmount(self) -> None:
        """Unmount (lazily if busy) and wait for the fs process to end."""
        if _mounted(self.mountpoint):
            result = subprocess.run(["fusermount", "-u", str(self.mountpoint)], capture_output=True)
            if result.returncode != 0:  # busy: a process under test still holds a file
                subprocess.run(["fusermount", "-u", "-z", str(self.mountpoint)], capture_output=True)
        try:
            self.process.wait(timeout=UNMOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if _mounted(self.mountpoint):  # the process died without unmounting
            subprocess.run(["fusermount", "-u", "-z", str(self.mountpoint)], capture_output=True)
        shutil.rmtree(self._control.parent, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def __enter__(self) -> FaultFs:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.unmount()


def mount(backing: Path | str, mountpoint: Path | str) -> FaultFs:
    """Start a faultfs process showing ``backing`` at ``mountpoint`` (both created if
    missing); return once the mount and its control socket answer.

    Raises:
        RuntimeError: the mount did not come up (the fs process's log tail says why).
    """
    backing, mountpoint = Path(backing), Path(mountpoint)
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    control_dir = Path(tempfile.mkdtemp(prefix="faultfs-"))  # short: a unix socket path has ~100 bytes
    control = control_dir / "control"
    log_file = open(control_dir / "faultfs.log", "ab")  # noqa: SIM115 - the child keeps it
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.faultfs.server", str(backing), str(mountpoint), str(control)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    finally:
        log_file.close()
    fs = FaultFs(backing, mountpoint, process, control)
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _mounted(mountpoint) and control.exists():
            with contextlib.suppress(OSError):
                fs._command("ping")
                return fs
        time.sleep(0.02)
    tail = fs.log_tail()
    fs.unmount()
    raise RuntimeError(f"faultfs did not mount {mountpoint}: {tail}")


def skip_unless_available() -> None:
    """pytest.skip the calling test, with the reason, where faultfs cannot run."""
    import pytest

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
