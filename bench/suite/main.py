"""``python -m bench``: run the named scenarios, write ``results/<timestamp>/``.

One directory per run: ``run.json`` (flags, profile, environment, the disk probes),
``<scenario>.json`` per scenario, ``summary.md`` and the PNG charts, both rebuilt from every
JSON in the directory — so ``--into latest`` (``make bench-peers``) adds scenarios to the last
run and its one summary. ``results/latest`` points at the newest run. Progress lines go to
stderr; the last stdout lines name the files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.capacity import NotEnoughSpace
from bench.suite import charts, perf_adapter, report, space
from bench.suite.cluster import ClusterSpec
from bench.suite.context import Context, progress
from bench.suite.probes import probe_mounts, simulated_limits
from bench.suite.profiles import PROFILES, Profile
from bench.suite.scenarios import DEFAULT, SCENARIOS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenarios",
        default=",".join(DEFAULT),
        help=f"comma-separated, from: {', '.join(SCENARIOS)}; 'all' = every one (default: {','.join(DEFAULT)})",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="quick",
        help="quick (make bench, minutes) or full (longer runs, more points, 10,000 topics)",
    )
    parser.add_argument("--journal-dir", type=Path, help="mount for every bookie's journal (default: temp dir)")
    parser.add_argument("--ledger-dir", type=Path, help="mount for every bookie's ledgers (default: temp dir)")
    parser.add_argument(
        "--disk-model",
        metavar="SPEC",
        help="SIMULATED disk for the bookies' journal and entry-log writers: hdd, ssd, or "
        "e.g. hdd:fsync_ms=8,mb_s=120[,same_device=1] (bench only; labelled in every report)",
    )
    parser.add_argument("--out", type=Path, default=Path("results"), help="results root (default results/)")
    parser.add_argument(
        "--into", metavar="DIR|latest", help="add to an existing run directory (its summary gains these scenarios)"
    )
    parser.add_argument("--bookies", type=int, default=3, help="bookies in the cluster (default 3: E/Qw/Qa 2/2/2)")
    parser.add_argument("--journal-sync", choices=("on", "off"), default="on", help="journalSyncData (default on)")
    parser.add_argument("--keep", action="store_true", help="keep the bookies' dirs on the mounts afterwards")
    parser.add_argument(
        "--bookie-set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a bookkeeper.conf key for every bookie (repeatable), e.g. flushEntrylogBytes=4194304",
    )
    parser.add_argument(
        "--broker-set", metavar="KEY=VALUE", action="append", default=[], help="a broker.conf key (repeatable)"
    )
    parser.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    override = parser.add_argument_group("profile overrides")
    override.add_argument("--duration", type=float, help="measured seconds per run")
    override.add_argument("--warmup", type=float, help="warm-up seconds per run")
    override.add_argument("--probe-secs", type=float, help="seconds per disk probe")
    override.add_argument("--consume-backlog", type=int, help="consume: messages published before the catch-up read")
    override.add_argument("--sizes", help="size: message sizes in bytes, comma-separated")
    override.add_argument("--rates", help="latency: target msg/s, comma-separated")
    override.add_argument("--topic-counts", help="topics: topic counts, comma-separated")
    override.add_argument("--topics-rate", type=int, help="topics: total msg/s")
    override.add_argument("--e2e-sizes", help="e2e-vs-bookie: entry sizes in bytes, comma-separated")
    override.add_argument("--interval", type=float, help="seconds between progress lines")
    args = parser.parse_args(argv)
    names = list(SCENARIOS) if args.scenarios == "all" else [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        parser.error(f"unknown scenario(s) {', '.join(unknown) or '(none)'}; known: {', '.join(SCENARIOS)}")
    args.scenario_names = names
    if args.disk_model:
        from minipulsar.bookie.disk_model import DiskModelSpec
        from minipulsar.errors import ConfigError

        try:
            DiskModelSpec.parse(args.disk_model)
        except ConfigError as exc:
            parser.error(str(exc))
    return args


def profile_of(args: argparse.Namespace) -> Profile:
    profile = PROFILES[args.profile]
    ints = lambda text: tuple(int(x) for x in text.split(",") if x.strip())  # noqa: E731
    changes: dict[str, Any] = {}
    for flag, field, convert in (
        ("duration", "duration_s", float),
        ("warmup", "warmup_s", float),
        ("probe_secs", "probe_s", float),
        ("sizes", "sizes", ints),
        ("rates", "rates", ints),
        ("topic_counts", "topic_counts", ints),
        ("topics_rate", "topics_total_rate", int),
        ("e2e_sizes", "e2e_sizes", ints),
        ("interval", "interval_s", float),
        ("consume_backlog", "consume_backlog", int),
    ):
        value = getattr(args, flag)
        if value is not None:
            changes[field] = convert(value)
    return replace(profile, **changes) if changes else profile


def run_directory(args: argparse.Namespace) -> Path:
    if args.into:
        path = args.out / "latest" if args.into == "latest" else Path(args.into)
        path = path.resolve()
        if not (path / "run.json").exists():
            raise SystemExit(f"--into {args.into}: no run.json in {path} (run `make bench` first)")
        return path
    path = args.out / time.strftime("%Y%m%d-%H%M%S")
    path.mkdir(parents=True, exist_ok=False)
    latest = args.out / "latest"
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        latest.symlink_to(path.name)
    except OSError:
        pass  # a file system without symlinks: --into takes the directory instead
    return path.resolve()


def environment() -> dict[str, Any]:
    from minipulsar.net.loop import uvloop_wanted

    return {
        "python": platform.python_version(),
        "loop": "uvloop" if uvloop_wanted() else "asyncio",
        "cpus": os.cpu_count(),
        "host": platform.node(),
        "kernel": platform.release(),
        "load_avg_at_start": os.getloadavg(),
        "engine": perf_adapter.LOAD_GENERATOR,
    }


def _settings(items: list[str]) -> dict[str, str]:
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


async def run(args: argparse.Namespace) -> int:
    profile = profile_of(args)
    run_dir = run_directory(args)
    cluster_spec = ClusterSpec(
        bookies=args.bookies,
        journal_dir=args.journal_dir,
        ledger_dir=args.ledger_dir,
        journal_sync=args.journal_sync == "on",
        disk_model=args.disk_model,
        bookie_settings=_settings(args.bookie_set),
        broker_settings=_settings(args.broker_set),
        keep=args.keep,
    )
    simulated = simulated_limits(args.disk_model)
    run_file = run_dir / "run.json"
    run_info = json.loads(run_file.read_text()) if run_file.exists() else {}
    started = time.monotonic()
    progress(f"bench: profile {profile.name}, scenarios {', '.join(args.scenario_names)} -> {run_dir}")
    if simulated:
        progress(f"bench: {simulated['label']} — every figure of this run is labelled SIMULATED")
    if not run_info.get("probes"):
        journal_dir = args.journal_dir or Path(tempfile.gettempdir())
        ledger_dir = args.ledger_dir or Path(tempfile.gettempdir())
        progress(f"probing mounts: journal {journal_dir}, ledgers {ledger_dir} ({profile.probe_s:g} s per probe)")
        run_info["probes"] = await probe_mounts(journal_dir, ledger_dir, profile.probe_s)
        journal = run_info["probes"]["journal"]
        progress(
            f"  journal mount: {journal['fsyncs_per_s_4k']:,.0f} fsyncs/s (4 KiB), "
            f"{journal['seq_write_mb_per_s']:,.0f} MB/s sequential with fdatasync"
        )
    try:
        for line in space.check(args.scenario_names, profile, cluster_spec, run_info["probes"]):
            progress(f"space: {line}")
    except NotEnoughSpace:
        if not args.into:
            _remove_run_directory(args.out, run_dir)
        raise
    run_info.setdefault("runs", []).append(
        {
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "argv": sys.argv[1:],
            "profile": profile.name,
            "scenarios": args.scenario_names,
            "environment": environment(),
        }
    )
    run_info.update(
        {
            "profile": profile.name,
            "profile_settings": _plain(profile),
            "cluster": cluster_spec.describe(),
            "simulated_disk_model": simulated,
        }
    )
    report.write_json(run_file, run_info)
    failures = 0
    for number, name in enumerate(args.scenario_names, start=1):
        module = SCENARIOS[name]
        ctx = Context(
            profile, cluster_spec, run_dir, run_info["probes"], name, f"[{number}/{len(args.scenario_names)} {name}]"
        )
        ctx.emit(f"{module.TITLE}{' (SIMULATED disk)' if simulated else ''}")
        scenario_started = time.monotonic()
        result: dict[str, Any] = {
            "scenario": name,
            "title": module.TITLE,
            "what": module.WHAT,
            "profile": profile.name,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cluster": cluster_spec.describe(),
            "simulated_disk_model": simulated,
            "engine": perf_adapter.LOAD_GENERATOR,
            "load_avg_at_start": os.getloadavg(),
        }
        try:
            result |= await module.run(ctx)
        except Exception as exc:  # noqa: BLE001 -- a scenario's boundary: one broken scenario keeps the others' results
            failures += 1
            result["error"] = f"{type(exc).__name__}: {exc}"
            ctx.emit(f"FAILED: {result['error']}")
            traceback.print_exc(file=sys.stderr)
        result["elapsed_s"] = time.monotonic() - scenario_started
        report.write_json(run_dir / f"{name}.json", result)
        ctx.emit(f"done in {result['elapsed_s']:.0f} s -> {name}.json")
    run_info["runs"][-1]["elapsed_s"] = time.monotonic() - started
    report.write_json(run_file, run_info)
    results = report.load_results(run_dir)
    summary = report.write_summary(run_dir, run_info, results)
    pngs = [] if args.no_charts else charts.write_charts(run_dir, results, simulated)
    elapsed = time.monotonic() - started
    progress(f"bench: finished in {elapsed:.0f} s ({failures} scenario(s) failed)")
    print(f"summary: {summary}")
    for png in pngs:
        print(f"chart: {png}")
    for line in report.headline_lines(results):
        print(line)
    return 1 if failures else 0


def _remove_run_directory(out: Path, run_dir: Path) -> None:
    """A run refused before it measured anything leaves no results directory behind."""
    shutil.rmtree(run_dir, ignore_errors=True)
    latest = out / "latest"
    if latest.is_symlink() and not latest.exists():
        latest.unlink()


def _plain(profile: Profile) -> dict[str, Any]:
    return {name: getattr(profile, name) for name in profile.__dataclass_fields__}


async def run_until_signalled(args: argparse.Namespace) -> int:
    """:func:`run`, cancelled by SIGTERM as by SIGINT (asyncio.Runner's own handler): either
    way every ``finally`` on the way out runs — servers stopped, their temp dirs removed.

    A cancellation can be lost on the way (CPython 3.11's ``wait_for`` swallows one that
    arrives as its inner await completes); a run that returns after a SIGTERM is still an
    interrupted run, as asyncio.Runner treats a SIGINT."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    signalled = []

    def on_sigterm() -> None:
        signalled.append(signal.SIGTERM)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        code = await run(args)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
    if signalled:
        raise asyncio.CancelledError
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from minipulsar.cli.common import tune_gc
    from minipulsar.net.loop import run as run_loop

    if argv is None:  # this process runs perf's producers: its GC stalls their messages
        tune_gc()

    try:
        return run_loop(run_until_signalled(args))
    except (KeyboardInterrupt, asyncio.CancelledError):
        progress("bench: interrupted (servers stopped, their data removed)")
        return 130
