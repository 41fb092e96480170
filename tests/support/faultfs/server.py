"""The faultfs process: ``python -m tests.support.faultfs.server BACKING MOUNTPOINT CONTROL_SOCKET``.

A pass-through FUSE file system (fusepy, libfuse2) over BACKING whose every change goes
through :class:`~tests.support.faultfs.model.DurabilityModel`, one operation at a time (one
lock: the model's undo log needs a total order). A thread answers one-line commands on the
unix socket CONTROL_SOCKET, each with one JSON line:

- ``ping``: ``{"ok": true}``;
- ``pending``: what a cut would revert now;
- ``cut [KEEP SEED]``: the power cut: revert everything not durable (the report of
  :meth:`DurabilityModel.power_cut`; with KEEP > 0, a partial cut keeping each unsynced page
  with that probability, drawn from SEED); every operation fails with EIO from then on,
  until the file system is unmounted (``fusermount -u``), which ends this process.

Mount options: ``big_writes`` (writes of up to 128 KiB reach us whole, not in 4 KiB pieces);
no ``direct_io`` (the page cache stays, so shared ``mmap`` works: sqlite's WAL index needs it).
Without the writeback cache every ``write`` reaches this process before it returns, so the
kernel never holds dirty data of its own: what the model sees is everything written.
O_DIRECT opens pass through (the kernel sends their writes here the same way).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import socketserver
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from fuse import FUSE, FuseOSError, Operations  # type: ignore[import-untyped]

from tests.support.faultfs.model import DurabilityModel

log = logging.getLogger("faultfs")

_STAT_FIELDS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid", "st_ino")
_STATVFS_FIELDS = (
    "f_bavail",
    "f_bfree",
    "f_blocks",
    "f_bsize",
    "f_favail",
    "f_ffree",
    "f_files",
    "f_flag",
    "f_frsize",
    "f_namemax",
)


_KERNEL_FLAGS = os.O_TRUNC | os.O_APPEND | os.O_DIRECT | os.O_SYNC | os.O_DSYNC
"""Open flags the kernel already acted on, kept off our descriptor: it sends truncates,
appends' offsets and syncs as their own requests, and our reads and writes are buffered
(the backing dir is never synced: see the model)."""


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a FUSE operation under the model's lock; EIO once the power was cut; ENOENT for
    the hidden graveyard."""

    def run(self: FaultOperations, path: str, *args: Any) -> Any:
        with self.mutex:
            if self.model.cut:
                raise FuseOSError(errno.EIO)
            if DurabilityModel.hidden(path):
                raise FuseOSError(errno.ENOENT)
            return method(self, path, *args)

    run.__name__ = method.__name__
    return run


class FaultOperations(Operations):
    """fusepy's operations over the model (paths are the mount's, ``/a/b``)."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.model = DurabilityModel(backing)
        self.mutex = threading.Lock()

    def _real(self, path: str) -> str:
        return self.model.real(path)

    # -- reading and metadata: passed through ---------------------------------------------------

    @_serialized
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh else os.lstat(self._real(path))
        attrs: dict[str, Any] = {key: getattr(st, key) for key in _STAT_FIELDS}
        for key in ("st_atime", "st_ctime", "st_mtime"):
            attrs[key] = getattr(st, key + "_ns")
        return attrs

    @_serialized
    def readdir(self, path: str, fh: int) -> Iterator[str]:
        names = [n for n in os.listdir(self._real(path)) if not (path == "/" and DurabilityModel.hidden(n))]
        return iter([".", "..", *names])

    @_serialized
    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    @_serialized
    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in _STATVFS_FIELDS}

    @_serialized
    def access(self, path: str, amode: int) -> None:
        if not os.access(self._real(path), amode):
            raise FuseOSError(errno.EACCES)

    @_serialized
    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self._real(path), mode)

    @_serialized
    def chown(self, path: str, uid: int, gid: int) -> None:
        os.chown(self._real(path), uid, gid)

    @_serialized
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        os.utime(self._real(path), ns=times) if times else os.utime(self._real(path))

    @_serialized
    def open(self, path: str, flags: int) -> int:
        fd = os.open(self._real(path), flags & ~_KERNEL_FLAGS)
        if flags & os.O_TRUNC:
            self.model.truncate(fd, 0)
        return fd

    @_serialized
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def flush(self, path: str, fh: int) -> None:  # on every close, even after the cut
        return None

    def release(self, path: str, fh: int) -> None:
        with self.mutex:  # even after the cut: the descriptor is ours
            os.close(fh)

    def opendir(self, path: str) -> int:
        return 0

    def releasedir(self, path: str, fh: int) -> None:
        return None

    # -- changes: through the model ---------------------------------------------------------

    @_serialized
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        real = self._real(path)
        existed = os.path.lexists(real)
        fd = os.open(real, os.O_RDWR | os.O_CREAT, mode)
        if not existed:
            self.model.created(path)
        return fd

    @_serialized
    def mknod(self, path: str, mode: int, dev: int) -> None:
        os.mknod(self._real(path), mode, dev)
        self.model.created(path)

    @_serialized
    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self._real(path), mode)
        self.model.created(path, "mkdir")

    @_serialized
    def symlink(self, target: str, source: str) -> None:
        os.symlink(source, self._real(target))
        self.model.created(target)

    @_serialized
    def link(self, target: str, source: str) -> None:
        os.link(self._real(source), self._real(target))
        self.model.created(target)

    @_serialized
    def unlink(self, path: str) -> None:
        self.model.unlink(path)

    @_serialized
    def rmdir(self, path: str) -> None:
        self.model.rmdir(path)

    @_serialized
    def rename(self, old: str, new: str) -> None:
        if DurabilityModel.hidden(new):
            raise FuseOSError(errno.EACCES)
        self.model.rename(old, new)

    @_serialized
    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return self.model.write(fh, data, offset)

    @_serialized
    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        if fh:
            self.model.truncate(fh, length)
            return
        fd = os.open(self._real(path), os.O_RDWR)
        try:
            self.model.truncate(fd, length)
        finally:
            os.close(fd)

    @_serialized
    def fsync(self, path: str, datasync: int, fh: int) -> None:
        self.model.fsync(fh)

    @_serialized
    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        self.model.fsyncdir(path)


class _ControlHandler(socketserver.StreamRequestHandler):
    server: _ControlServer

    def handle(self) -> None:
        for raw in self.rfile:
            command = raw.decode().strip()
            self.wfile.write((json.dumps(self.server.answer(command)) + "\n").encode())
            self.wfile.flush()


class _ControlServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, operations: FaultOperations) -> None:
        self.operations = operations
        super().__init__(path, _ControlHandler)

    def answer(self, command: str) -> dict[str, Any]:
        model, lock = self.operations.model, self.operations.mutex
        with lock:
            if command == "ping":
                return {"ok": True}
            if command == "pending":
                return {
                    "ok": True,
                    "cut": model.cut,
                    "syncs": model.syncs,
                    "dir_syncs": model.dir_syncs,
                    **model.pending(),
                }
            if command.split()[:1] == ["cut"]:
                if model.cut:
                    return {"ok": False, "error": "power was cut already"}
                _, keep, seed = (command.split() + ["0", "0"])[:3]
                report = model.power_cut(float(keep), random.Random(int(seed)))
                log.info("power cut: %s", report.as_dict())
                return {"ok": True, **report.as_dict()}
        return {"ok": False, "error": f"unknown command {command!r}"}


def main(argv: list[str]) -> int:
    backing, mountpoint, control = argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    operations = FaultOperations(backing)
    if os.path.exists(control):
        os.unlink(control)
    server = _ControlServer(control, operations)
    threading.Thread(target=server.serve_forever, name="faultfs-control", daemon=True).start()
    log.info("mounting %s over %s (control %s)", mountpoint, backing, control)
    try:
        FUSE(operations, mountpoint, foreground=True, big_writes=True, fsname="faultfs", subtype="faultfs")
    finally:
        server.shutdown()
        operations.model.close()
        log.info("unmounted %s", mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
