"""The soak: the fault harness (:mod:`tests.support.jepsen`) for a long while, one table at
the end; exits 1 on any violation.

    python -m tests.support.soak --minutes 30 --seed 7 [--profile single|overlap|five]

(``make soak MINUTES=30 SEED=7 PROFILE=single``.) It lives beside the test support rather
than in ``bench/`` because it is a correctness test built of that support (its cluster, its
processes), not a measurement. The cluster keeps its dirs and logs under ``--dir`` (a fresh
temp dir by default, removed after a passing run; kept after a failing one or when given,
with the whole history in ``history.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support.jepsen.profiles import PROFILES
from tests.support.jepsen.run import run_once


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="single")
    parser.add_argument("--dir", type=Path, default=None, help="where the cluster's dirs and logs go")
    parser.add_argument("--pace-ms", type=float, default=10.0, help="pause between two sends of one producer")
    parser.add_argument(
        "--broker-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf key over the harness's (e.g. brokerDeduplicationEnabled=false, to see it find duplicates)",
    )
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="minipulsar-soak-"))
    command = shlex.join([sys.executable, "-m", "tests.support.soak", *(argv if argv is not None else sys.argv[1:])])
    print(f"soak: profile {args.profile}, seed {args.seed}, {args.minutes:g} min, dirs under {root}", flush=True)
    broker_settings = dict(item.split("=", 1) for item in args.broker_set)
    profile = PROFILES[args.profile]
    result = asyncio.run(
        run_once(
            root, profile, args.seed, args.minutes * 60, broker_settings=broker_settings, pace_s=args.pace_ms / 1000
        )
    )
    print(result.table())
    print(f"command: {command}")
    if result.ok and args.dir is None:
        shutil.rmtree(root, ignore_errors=True)
    else:
        result.history.dump(root / "history.json")
        print(f"dirs, logs and history.json kept under {root}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
