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
device, the deployment BookKeeper recommends).

Invariants:
- a device serves one operation at a time: an operation starts when the device is free and
  the caller arrived, holds it for its modelled time, and its caller returns only when it is
  over (so the bandwidth cap holds however many threads write);
- the modelled time is added on top of the real write (whose own time, on the fast disks this
  is for, is small); the wait happens on the writer's own thread, never on the event loop;
- one model per process (a bookie is one process); :func:`install` replaces it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class DiskModelSpec:
    name: str
    fsync_ms: float
    mb_s: float
    same_device: bool = False

    @classmethod
    def parse(cls, text: str) -> DiskModelSpec:
        """``hdd`` / ``hdd:fsync_ms=8,mb_s=120`` / ``ssd:same_device=1``.

        Raises:
            ConfigError: unknown preset or key, or a value that is not a number >= 0.
        """
        name, _, rest = text.strip().partition(":")
        if name not in PRESETS:
            raise ConfigError(f"minipulsarSimulatedDiskModel: unknown model {name!r} (known: {', '.join(PRESETS)})")
        values: dict[str, float] = dict(PRESETS[name]) | {"same_device": 0.0}
        for item in filter(None, (part.strip() for part in rest.split(","))):
            key, sep, value = item.partition("=")
            if not sep or key.strip() not in values:
                raise ConfigError(
                    f"minipulsarSimulatedDiskModel: expected fsync_ms=, mb_s= or same_device=, got {item!r}"
                )
            try:
                number = float(value)
            except ValueError:
                number = -1.0
            if number < 0:
                raise ConfigError(f"minipulsarSimulatedDiskModel: {key.strip()} must be a number >= 0, got {value!r}")
            values[key.strip()] = number
        return cls(name, values["fsync_ms"], values["mb_s"], bool(values["same_device"]))

    def describe(self) -> str:
        cap = f"{self.mb_s:g} MB/s" if self.mb_s else "no bandwidth cap"
        return (
            f"SIMULATED {self.name}: {self.fsync_ms:g} ms per fsync, {cap}"
            f"{', journal and ledgers on one device' if self.same_device else ''}"
        )


class _Device:
    """One modelled device: when it is next free (monotonic seconds)."""

    __slots__ = ("free_at", "lock")

    def __init__(self) -> None:
        self.free_at = 0.0
        self.lock = threading.Lock()


class DiskModel:
    def __init__(self, spec: DiskModelSpec) -> None:
        self.spec = spec
        self._fsync_s = spec.fsync_ms / 1000
        self._s_per_byte = 1 / (spec.mb_s * 1e6) if spec.mb_s else 0.0
        self._devices: dict[str, _Device] = {}
        self._devices_lock = threading.Lock()
        self.waited_s = 0.0
        """Total modelled time callers waited (for tests and logs)."""

    def wrote(self, directory: object, size_bytes: int, synced: bool) -> None:
        """Writer thread: ``size_bytes`` were just written to ``directory`` (and synced, if
        ``synced``); wait until the modelled device would have finished."""
        cost_s = size_bytes * self._s_per_byte + (self._fsync_s if synced else 0.0)
        if cost_s <= 0:
            return
        device = self._device("one" if self.spec.same_device else str(directory))
        with device.lock:
            done_at = max(time.monotonic(), device.free_at) + cost_s
            device.free_at = done_at
        wait_s = done_at - time.monotonic()
        if wait_s > 0:
            time.sleep(wait_s)  # the simulated device at work: this thread is the writer, not the loop
            self.waited_s += wait_s

    def _device(self, key: str) -> _Device:
        device = self._devices.get(key)
        if device is None:
            with self._devices_lock:
                device = self._devices.setdefault(key, _Device())
        return device


def install(spec_text: str | None) -> DiskModel | None:
    """Install the model named by ``minipulsarSimulatedDiskModel`` (None or "": none).

    Raises:
        ConfigError: a bad spec (the bookie refuses to start rather than run unmodelled).
    """
    global MODEL  # noqa: PLW0603 -- one model per process, installed at start-up
    MODEL = DiskModel(DiskModelSpec.parse(spec_text)) if spec_text else None
    if MODEL is not None:
        log.warning("minipulsarSimulatedDiskModel: %s (benchmarks only)", MODEL.spec.describe())
    return MODEL
