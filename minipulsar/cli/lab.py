"""``minipulsar lab list | run NAME|all [--quick] [--out DIR]``: the tuning lab (minipulsar/lab/).

``run`` starts each scenario's own cluster, runs its baseline and tuned variants on a seeded
workload and writes ``DIR/NAME/report.md``, ``result.json`` and PNG charts. Exit codes: 0 every
scenario ran and reproduced its finding, 3 one ran but did not reproduce it, 1 one failed to
run (or bad arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from minipulsar.cli.common import EXIT_FAILURE
from minipulsar.errors import ConfigError

EXIT_NOT_REPRODUCED = 3
DEFAULT_SEED = 7


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "lab",
        help="the tuning lab: reproduce the tuning reports' findings on a live cluster",
        description="Each scenario starts its own cluster and runs a baseline and a tuned setting side by side.",
    )
    verbs = parser.add_subparsers(dest="lab_verb", required=True, metavar="VERB")
    listing = verbs.add_parser("list", help="name every scenario and the report it reproduces")
    listing.set_defaults(func=_list)
    run = verbs.add_parser("run", help="run a scenario (or 'all') and write its report")
    run.add_argument("name", help="a scenario from 'minipulsar lab list', or 'all'")
    run.add_argument("--quick", action="store_true", help="the short profile (a couple of minutes per scenario)")
    run.add_argument("--out", type=Path, default=Path("lab-results"), help="where reports go (default: lab-results)")
    run.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"workload seed (default {DEFAULT_SEED})")
    run.add_argument("--journal-dir", type=Path, help="a real mount for the journals (with --ledger-dir)")
    run.add_argument("--ledger-dir", type=Path, help="a real mount for the ledgers (with --journal-dir)")
    run.add_argument(
        "--disks",
        choices=("auto", "emulated", "simulated"),
        default="auto",
        help="without real mounts: emulated HDDs (loop devices throttled by cgroup blkio; root), "
        "the in-process model, or whichever this machine allows (default)",
    )
    run.add_argument("--work-dir", type=Path, help="where the processes' data and logs go (default: the temp dir)")
    run.add_argument("--keep", action="store_true", help="keep the work dir (data, logs) after the run")
    run.set_defaults(func=_run)


def _list(args: argparse.Namespace) -> int:
    from minipulsar.lab.catalog import scenarios

    for scenario in scenarios().values():
        print(f"{scenario.name:26} {scenario.title}")
        print(f"{'':26} {scenario.source}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from minipulsar.lab.catalog import scenarios

    catalog = scenarios()
    if args.name != "all" and args.name not in catalog:
        print(f"minipulsar lab: no scenario {args.name!r}; 'minipulsar lab list' names them", file=sys.stderr)
        return EXIT_FAILURE
    if (args.journal_dir is None) != (args.ledger_dir is None):
        print("minipulsar lab: --journal-dir and --ledger-dir go together", file=sys.stderr)
        return EXIT_FAILURE
    try:
        import matplotlib  # noqa: F401 -- the charts need it
    except ImportError:
        print("minipulsar lab: the charts need matplotlib: pip install 'minipulsar[lab]'", file=sys.stderr)
        return EXIT_FAILURE
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    names = list(catalog) if args.name == "all" else [args.name]
    try:
        return asyncio.run(_main([catalog[name] for name in names], args))
    except KeyboardInterrupt:
        print("minipulsar lab: interrupted; its processes are stopped and its disks removed", file=sys.stderr)
        return EXIT_FAILURE


async def _main(selected: list, args: argparse.Namespace) -> int:
    """:func:`_run_all`, cancelled by SIGTERM as by Ctrl-C, so the scenario's processes and disks are undone."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await _run_all(selected, args)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


async def _run_all(selected: list, args: argparse.Namespace) -> int:
    from minipulsar.lab.disk_choice import choose_disks
    from minipulsar.lab.gallery import write_gallery
    from minipulsar.lab.progress import Progress
    from minipulsar.lab.runner import ScenarioFailed, run_scenario
    from minipulsar.lab.scenario import FULL, QUICK

    try:
        choice = choose_disks(args.disks, args.journal_dir, args.ledger_dir)
    except ConfigError as error:
        print(f"minipulsar lab: {error}", file=sys.stderr)
        return EXIT_FAILURE
    progress = Progress()
    progress.phase(f"disks: {choice.label}")
    code = 0
    finished = []
    for scenario in selected:
        try:
            result = await run_scenario(
                scenario,
                out_dir=args.out,
                profile=QUICK if args.quick else FULL,
                seed=args.seed,
                disks=choice.provider,
                disk_label=choice.label,
                progress=progress,
                work_dir=args.work_dir,
                keep=args.keep,
            )
        except ScenarioFailed as error:
            print(f"minipulsar lab: {error}", file=sys.stderr)
            code = EXIT_FAILURE
            continue
        finished.append((scenario, result))
        if not result.reproduced and code == 0:
            code = EXIT_NOT_REPRODUCED
    if len(selected) > 1:
        progress.done(f"gallery: {write_gallery(args.out, finished)}")
    return code
