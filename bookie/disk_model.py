"""A SIMULATED slow disk for benchmarks: an HDD's fsync latency and bandwidth on any disk.

Bench only and off by default (``minipulsarSimulatedDiskModel``, unset). With a model
installed, the journal's writer thread (after each group's write and sync) and the ledger
storage's flush thread (after each flush of the entry logs) wait as long as the modelled
device would have taken: ``fsync_ms`` per sync plus ``bytes / mb_s``. So the HDD symptoms of
BIGO's report — add-entry p99 rising with load, the write cache filling while a slow flush
runs, memory building up in front of the journal — show on a machine whose disk acknowledges
a flush in 0.03 ms. Reads are not modelled.

Spec: ``<preset>[:key=value,...]``, e.g. ``hdd`` or ``hdd:fsync_ms=8,mb_s=120``.
Keys: ``fsync_ms`` (device time per sync), ``mb_s`` (decimal MB/s of writes; 0: no cap),
``same_device`` (1: the journal and the entry logs of this bookie share ONE modelled device,
as on a single-disk box; 0, the default: each journal dir and each ledger dir is its own
device, the deployment BookKeeper recommends), and ``journal_device=/abs/path`` (the journal
disk is SHARED with every bookie process naming the same file, BIGO's three bookies per
journal disk; with ``same_device=1`` this bookie's entry logs go on it too). The path must be
absolute and ``journal_device`` must be the LAST key: its value runs to the end of the spec,
so it may hold ``,`` and ``:`` (e.g. ``hdd:mb_s=100,journal_device=/tmp/lab/disk-0.dev``).

A shared device lives in its file (created if missing, 16 bytes): at offset 0 the total bytes
written to it (u64, little-endian; the bookie's load report reads it as its journal disk's
write counter when there is no block device to read), at offset 8 when it is next free
(``time.monotonic()`` seconds, f64). Each operation updates both under an ``fcntl`` lock of
the file, so the processes sharing it keep one timeline.

Invariants:
- a device serves one operation at a time: an operation starts when the device is free and
  the caller arrived, holds it for its modelled time, and its caller returns only when it is
  over (so the bandwidth cap holds however many threads write — and, for a shared device,
  however many processes: the cap holds for the sum of the neighbours);
- a shared device's state is read and written only under both its in-process lock and its
  file lock (``fcntl`` locks belong to the process, so threads need the first); processes
  sharing one must be on one host (``CLOCK_MONOTONIC`` is host-wide); a process opens each
  shared file once (:func:`shared_device`) and keeps it open;
- bytes are counted when the operation is queued, so the counter runs ahead of the device by
  at most the queued operations;
- the modelled time is added on top of the real write (whose own time, on the fast disks this
  is for, is small); the wait happens on the writer's own thread, never on the event loop;
- one model per process (a bookie is one process); :func:`install` replaces it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from minipulsar.errors import ConfigError

log = logging.getLogger(__name__)

PRESETS: dict[str, dict[str, float]] = {
    # a 7200 rpm disk: a flush costs about a rotation plus a seek; ~120 MB/s sequential
    "hdd": {"fsync_ms": 8.0, "mb_s": 120.0},
    # a SATA SSD without power-loss protection (each flush reaches the NAND)
    "ssd": {"fsync_ms": 0.5, "mb_s": 450.0},
}

MODEL: DiskModel | None = None
"""The installed model; None (the default) costs the call sites one global lookup."""

JOURNAL_DEVICE_KEY = re.compile(r"(?:^|,)\s*journal_device=")
"""Where the last key starts; everything after it is the path."""
SHARED_STATE = struct.Struct("<Qd")
"""A shared device file: bytes written so far, then when the device is next free (monotonic s)."""
SHARED_FREE_AT_AHEAD_S_MAX = 60.0
"""A free time further ahead than this is left from an earlier boot or run (a real queue is a
few operations of well under a second each): the device is taken as free now."""


@dataclass(frozen=True, slots=True)
class DiskModelSpec:
    name: str
    fsync_ms: float
    mb_s: float
    same_device: bool = False
    journal_device: Path | None = None
    """The file of a journal device shared across bookie processes; None: this bookie's own."""

    @classmethod
    def parse(cls, text: str) -> DiskModelSpec:
        """``hdd`` / ``hdd:fsync_ms=8,mb_s=120`` / ``ssd:same_device=1`` / ``hdd:journal_device=/d.dev``.

        Raises:
            ConfigError: unknown preset or key, a value that is not a number >= 0, or a
                ``journal_device`` that is not an absolute path.
        """
        name, _, rest = text.strip().partition(":")
        if name not in PRESETS:
            raise ConfigError(f"minipulsarSimulatedDiskModel: unknown model {name!r} (known: {', '.join(PRESETS)})")
        journal_device = None
        if (key := JOURNAL_DEVICE_KEY.search(rest)) is not None:
            rest, path = rest[: key.start()], rest[key.end() :].strip()
            if not path or not os.path.isabs(path):
                raise ConfigError(
                    f"minipulsarSimulatedDiskModel: journal_device must be an absolute path, got {path!r}"
                )
            journal_device = Path(path)
        values = _numbers(rest, dict(PRESETS[name]) | {"same_device": 0.0})
        return cls(name, values["fsync_ms"], values["mb_s"], bool(values["same_device"]), journal_device)

    def describe(self) -> str:
        cap = f"{self.mb_s:g} MB/s" if self.mb_s else "no bandwidth cap"
        return (
            f"SIMULATED {self.name}: {self.fsync_ms:g} ms per fsync, {cap}"
            f"{', journal and ledgers on one device' if self.same_device else ''}"
            f"{f', journal on the shared device {self.journal_device}' if self.journal_device else ''}"
        )


def _numbers(text: str, values: dict[str, float]) -> dict[str, float]:
    """``values`` with the ``key=number`` items of ``text`` (comma-separated) applied."""
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in values:
            raise ConfigError(
                "minipulsarSimulatedDiskModel: expected fsync_ms=, mb_s=, same_device= or (last)"
                f" journal_device=, got {item!r}"
            )
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if number < 0:
            raise ConfigError(f"minipulsarSimulatedDiskModel: {key.strip()} must be a number >= 0, got {value!r}")
        values[key.strip()] = number
    return values


class _Device:
    """One modelled device of this process: when it is next free (monotonic seconds)."""

    __slots__ = ("free_at", "lock", "written_bytes")

    def __init__(self) -> None:
        self.free_at = 0.0
        self.written_bytes = 0
        self.lock = threading.Lock()

    def reserve(self, size_bytes: int, cost_s: float) -> float:
        """Queue an operation of ``cost_s``; returns when it is over (monotonic seconds)."""
        with self.lock:
            self.free_at = max(time.monotonic(), self.free_at) + cost_s
            self.written_bytes += size_bytes
            return self.free_at


class SharedDevice:
    """A modelled device shared by every process that names the same file (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.disk_id = f"simulated:{path}"
        """How the bookie's load report names this device (``journalDiskId``)."""
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._lock = threading.Lock()

    def reserve(self, size_bytes: int, cost_s: float) -> float:
        """Queue an operation of ``cost_s`` on the shared timeline; returns when it is over."""
        with self._locked():
            written, free_at = self._read()
            now = time.monotonic()
            if free_at > now + SHARED_FREE_AT_AHEAD_S_MAX:
                free_at = now
            done_at = max(now, free_at) + cost_s
            os.pwrite(self._fd, SHARED_STATE.pack(written + size_bytes, done_at), 0)
        return done_at

    def written_bytes(self) -> int:
        """Bytes written to the device so far, by every process sharing it. Blocking (a file lock)."""
        with self._locked():
            return self._read()[0]

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def _read(self) -> tuple[int, float]:
        data = os.pread(self._fd, SHARED_STATE.size, 0)
        if len(data) < SHARED_STATE.size:  # a new file: nothing written, free now
            return 0, 0.0
        written, free_at = SHARED_STATE.unpack(data)
        return written, free_at


def shared_device(path: Path) -> SharedDevice:
    """The process's one :class:`SharedDevice` for ``path`` (opened on first use, kept open).

    One object per file and process, because ``fcntl`` locks do not exclude the threads of one
    process (and closing any descriptor of the file drops them): two models of one process
    naming the same file must share the in-process lock too.
    """
    key = Path(os.path.normpath(path))
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = SharedDevice(key)
        return _SHARED[key]


_SHARED: dict[Path, SharedDevice] = {}
_SHARED_LOCK = threading.Lock()


class DiskModel:
    def __init__(self, spec: DiskModelSpec) -> None:
        self.spec = spec
        self._fsync_s = spec.fsync_ms / 1000
        self._s_per_byte = 1 / (spec.mb_s * 1e6) if spec.mb_s else 0.0
        self._devices: dict[str, _Device] = {}
        self._devices_lock = threading.Lock()
        self.journal_device = shared_device(spec.journal_device) if spec.journal_device else None
        """The shared journal device, if the spec names one (its counter feeds the load report)."""
        self.waited_s = 0.0
        """Total modelled time callers waited (for tests and logs)."""

    def wrote(self, directory: object, size_bytes: int, synced: bool, *, journal: bool = False) -> None:
        """Writer thread: ``size_bytes`` were just written to ``directory`` (a journal's, if
        ``journal``) and synced, if ``synced``; wait until the modelled device would have finished."""
        cost_s = size_bytes * self._s_per_byte + (self._fsync_s if synced else 0.0)
        if cost_s <= 0 and size_bytes <= 0:
            return  # nothing to wait for and nothing to count
        done_at = self._device(directory, journal).reserve(size_bytes, cost_s)
        wait_s = done_at - time.monotonic()
        if wait_s > 0:
            time.sleep(wait_s)  # the simulated device at work: this thread is the writer, not the loop
            self.waited_s += wait_s

    def _device(self, directory: object, journal: bool) -> _Device | SharedDevice:
        if self.journal_device is not None and (journal or self.spec.same_device):
            return self.journal_device
        key = "one" if self.spec.same_device else str(directory)
        device = self._devices.get(key)
        if device is None:
            with self._devices_lock:
                device = self._devices.setdefault(key, _Device())
        return device


def install(spec_text: str | None) -> DiskModel | None:
    """Install the model named by ``minipulsarSimulatedDiskModel`` (None or "": none).

    Raises:
        ConfigError: a bad spec (the bookie refuses to start rather than run unmodelled).
        OSError: the shared journal device file cannot be opened.
    """
    global MODEL  # noqa: PLW0603 -- one model per process, installed at start-up
    MODEL = DiskModel(DiskModelSpec.parse(spec_text)) if spec_text else None
    if MODEL is not None:
        log.warning("minipulsarSimulatedDiskModel: %s (benchmarks only)", MODEL.spec.describe())
    return MODEL
