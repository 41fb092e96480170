"""What every bench shares: flags, real server processes, latency histograms, progress, the JSON line.

Benches start the same processes the tests start (:class:`tests.support.process.ServerProcess`:
``python -m minipulsar <role>`` on 127.0.0.1 port 0, READY line, TERM then KILL), so they
measure exactly what the tests run. Every bench prints progress lines while it runs and ends
with ONE JSON line (name, parameters, Python version, event loop, figures); ``--json FILE``
writes the same object to a file.

Run benches from the project root (``.venv/bin/python bench/<name>.py``): this module puts
the root on ``sys.path`` so ``tests.support`` and the project packages import as in the tests.
"""

from __future__ import annotations

import argparse
import array
import collections
import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hdrh.histogram import HdrHistogram  # noqa: E402

from minipulsar.net.loop import uvloop_wanted  # noqa: E402
from tests.support.process import ServerProcess  # noqa: E402

MB = 1_000_000
"""Throughput is in decimal MB/s, as ``hop_ceiling.py`` and ``pulsar-perf`` print it."""
LATENCY_US_MAX = 60_000_000
"""Slowest latency a histogram records (60 s); anything slower is clamped to it."""


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags every bench takes: how long to measure, and where the JSON goes."""
    parser.add_argument("--secs", type=float, default=5.0, help="measured seconds per run (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds run before measuring (default 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the result object to FILE")
    parser.add_argument(
        "--progress-interval", type=float, default=1.0, metavar="S", help="seconds between progress lines (default 1)"
    )


# -- latency ---------------------------------------------------------------------------------


class LatencyHistogram:
    """Latencies in microseconds (HdrHistogram, 3 significant digits), read back in ms.

    Recording is one ``array.append`` (~0.1 µs; ``HdrHistogram.record_value`` costs ~0.8 µs
    in Python, which would make the bench's own client the bottleneck); samples are folded
    into the HdrHistogram when percentiles are asked for.
    """

    __slots__ = ("_histogram", "_pending", "record_us")

    def __init__(self) -> None:
        self._histogram = HdrHistogram(1, LATENCY_US_MAX, 3)
        self._pending = array.array("q")
        self.record_us = self._pending.append
        """``record_us(latency_us)``: the hot path."""

    def _fold(self) -> None:
        record = self._histogram.record_value
        for latency_us, count in collections.Counter(self._pending).items():
            record(min(max(latency_us, 1), LATENCY_US_MAX), count)
        del self._pending[:]  # in place: ``record_us`` stays bound to this array

    def mark(self) -> int:
        """A position for :meth:`percentile_since_ms` (valid until percentiles are read)."""
        return len(self._pending)

    def percentile_since_ms(self, mark: int, percentile: float) -> float | None:
        """The percentile of the samples recorded since ``mark`` (a sorted copy: progress lines)."""
        recent = sorted(self._pending[mark:])
        if not recent:
            return None
        return recent[min(len(recent) - 1, int(len(recent) * percentile / 100))] / 1000

    @property
    def count(self) -> int:
        return self._histogram.get_total_count() + len(self._pending)

    def percentile_ms(self, percentile: float) -> float | None:
        self._fold()
        if self._histogram.get_total_count() == 0:
            return None
        return self._histogram.get_value_at_percentile(percentile) / 1000

    def summary_ms(self) -> dict[str, float | None]:
        """p50 / p99 / p999 / max in ms (None when nothing was recorded)."""
        self._fold()
        return {
            "p50_ms": self.percentile_ms(50),
            "p99_ms": self.percentile_ms(99),
            "p999_ms": self.percentile_ms(99.9),
            "max_ms": self._histogram.get_max_value() / 1000 if self.count else None,
        }


# -- servers ---------------------------------------------------------------------------------


@dataclass
class BookieDirs:
    """Where one bookie keeps its journal and its ledgers (fresh sub-dirs of the user's dirs)."""

    journal: Path
    ledgers: Path
    logs: Path


@contextlib.contextmanager
def bench_dirs(
    journal_dir: str | None, ledger_dir: str | None, keep: bool = False
) -> Iterator[tuple[Path, Path, Path]]:
    """``(journal parent, ledger parent, logs)``: fresh temp dirs inside the given ones (or the
    system temp dir), removed at the end unless ``keep`` — except the logs of a run that
    failed; the user's own dirs stay untouched."""
    created: list[Path] = []
    failed = False

    def fresh(parent: str | None, prefix: str) -> Path:
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        created.append(path)
        return path

    try:
        journal = fresh(journal_dir, "bench-journal-")
        ledgers = fresh(ledger_dir, "bench-ledgers-")
        logs = fresh(None, "bench-logs-")
        yield journal, ledgers, logs
    except BaseException:
        failed = True
        raise
    finally:
        if not keep:
            for path in created:
                if failed and path.name.startswith("bench-logs-"):
                    print(f"the run failed: the servers' logs are kept in {path}", file=sys.stderr)
                    continue
                shutil.rmtree(path, ignore_errors=True)


def metastore_process(data_dir: Path, logs: Path) -> ServerProcess:
    return ServerProcess(
        "metastore", ["--port", "0", "--http-port", "0", "--data-dir", str(data_dir)], logs / "metastore.log"
    )


def bookie_process(
    dirs: BookieDirs, metadata_url: str, settings: dict[str, Any], name: str = "bookie"
) -> ServerProcess:
    """A bookie on port 0 with one journal dir and one ledger dir; ``settings`` are
    ``bookkeeper.conf`` keys passed with ``--set`` (e.g. ``journalSyncData``)."""
    args = [
        "--port",
        "0",
        "--http-port",
        "0",
        "--journal-dir",
        str(dirs.journal),
        "--ledger-dirs",
        str(dirs.ledgers),
        "--metadata-url",
        metadata_url,
    ]
    for key, value in settings.items():
        args += ["--set", f"{key}={_conf_value(value)}"]
    return ServerProcess("bookie", args, dirs.logs / f"{name}.log")


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@contextlib.contextmanager
def running(*processes: ServerProcess) -> Iterator[None]:
    """Start in order, always stop in reverse (TERM, then KILL), even on Ctrl-C."""
    started: list[ServerProcess] = []
    try:
        for process in processes:
            started.append(process)
            process.start()
        yield
    finally:
        for process in reversed(started):
            process.stop()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- output ----------------------------------------------------------------------------------


def progress(text: str) -> None:
    """One progress line on stderr (stdout ends with the JSON line alone)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "loop": "uvloop" if uvloop_wanted() else "asyncio",
        "cpus": os.cpu_count(),
        "host": platform.node(),
    }


def emit_result(result: dict[str, Any], json_path: str | None) -> None:
    """Print the result as one JSON line on stdout; write it to ``json_path`` too."""
    line = json.dumps(result, sort_keys=False, default=_json_default)
    if json_path:
        path = Path(json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    print(line, flush=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def fmt(value: float | None, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)
