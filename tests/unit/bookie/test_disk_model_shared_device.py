"""The SIMULATED disk model's shared journal device: its spec key, and one device timeline for
every writer naming the same file (threads here; processes in tests/component)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from minipulsar.bookie.disk_model import DiskModel, DiskModelSpec, shared_device
from minipulsar.errors import ConfigError


def test_journal_device_is_the_last_key_and_its_path_may_hold_commas_and_colons() -> None:
    spec = DiskModelSpec.parse("hdd:mb_s=100,journal_device=/lab/a,b:c.dev")
    assert spec == DiskModelSpec("hdd", 8.0, 100.0, False, Path("/lab/a,b:c.dev"))
    assert DiskModelSpec.parse("ssd:journal_device=/d.dev").journal_device == Path("/d.dev")
    assert DiskModelSpec.parse("hdd:journal_device=/d.dev,mb_s=5").journal_device == Path("/d.dev,mb_s=5")
    assert "shared device /d.dev" in DiskModelSpec.parse("hdd:journal_device=/d.dev").describe()
    for bad in ("hdd:journal_device=", "hdd:journal_device=lab/d.dev", "hdd:mb_s=1,journal_device= "):
        with pytest.raises(ConfigError, match="absolute path"):
            DiskModelSpec.parse(bad)


def test_one_process_has_one_shared_device_per_file(tmp_path: Path) -> None:
    assert shared_device(tmp_path / "d.dev") is shared_device(tmp_path / "." / "d.dev")
    assert shared_device(tmp_path / "d.dev") is not shared_device(tmp_path / "e.dev")


def test_two_models_naming_one_file_share_its_bandwidth_and_counter(tmp_path: Path) -> None:
    """Goal: two bookies' models in one process on one device file (two in-process bookies):
    the cap holds for the sum. Method: two threads each write 10 x 1 MB to their journal at
    100 MB/s (0.1 s alone); together they take at least 0.2 s, and the counter holds 20 MB."""
    spec = f"hdd:fsync_ms=0,mb_s=100,journal_device={tmp_path / 'journal-disk.dev'}"
    models = [DiskModel(DiskModelSpec.parse(spec)) for _ in range(2)]
    writers = [
        threading.Thread(target=lambda m=m: [m.wrote(f"/j{id(m)}", 1_000_000, False, journal=True) for _ in range(10)])
        for m in models
    ]
    started = time.monotonic()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert time.monotonic() - started >= 0.2 * 0.99
    assert models[0].journal_device is models[1].journal_device
    assert models[0].journal_device is not None and models[0].journal_device.written_bytes() == 20_000_000


def test_a_shared_device_counts_what_costs_no_time_and_only_the_journal_goes_on_it(tmp_path: Path) -> None:
    """Goal: the counter is the journal disk's: bytes count even with no cap (mb_s=0,
    fsync_ms=0); entry-log flushes go to the bookie's own ledger device unless same_device=1."""
    model = DiskModel(DiskModelSpec.parse(f"hdd:fsync_ms=0,mb_s=0,journal_device={tmp_path / 'd.dev'}"))
    model.wrote("/journal/current", 4096, True, journal=True)
    model.wrote("/ledgers/current", 1_000_000, True)
    assert model.journal_device is not None and model.journal_device.written_bytes() == 4096
    both = DiskModel(DiskModelSpec.parse(f"hdd:fsync_ms=0,mb_s=0,same_device=1,journal_device={tmp_path / 'e.dev'}"))
    both.wrote("/ledgers/current", 1_000_000, True)
    assert both.journal_device is not None and both.journal_device.written_bytes() == 1_000_000
