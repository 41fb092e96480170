"""What a suite run will write on the journal and ledger mounts, per scenario (upper bounds).

Each scenario's clusters are removed when they stop, so the run needs room for its largest
cluster's data, not the sum (with ``--keep``: the sum). A cluster's bytes are its runs' bytes:
``(warmup + duration) × rate × size`` of payload, on Qw journals and Qw entry logs; a run as
fast as acknowledged at :func:`bench.capacity.full_speed_bytes_per_s`, capped by the probed
sequential rate of each device (journal and ledgers on one device share that cap). Estimates
are per scenario name; a scenario this module does not know is taken as one full-speed 1 KiB
batched run.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.capacity import BATCHED_MSG_PER_S_MAX, PAYLOAD_MB_PER_S_MAX, UNBATCHED_MSG_PER_S_MAX, Write, check_space
from bench.suite.cluster import ClusterSpec
from bench.suite.profiles import KIB, Profile

Run = tuple[int, bool, float]
"""(message size, batching, rate msg/s; 0: as fast as acknowledged) of one measured run."""


def _size(p: Profile) -> list[list[Run]]:
    return [[(size, batching, 0.0) for size in p.sizes] for batching in (True, False)]


def _latency(p: Profile) -> list[list[Run]]:
    return [[(KIB, True, float(rate)) for rate in p.rates]]


def _topics(p: Profile) -> list[list[Run]]:
    return [[(KIB, True, float(p.topics_total_rate))] for _ in p.topic_counts]


def _disks(p: Profile) -> list[list[Run]]:
    return [[(64 * KIB, True, 0.0), (KIB, False, 0.0)]]


def _e2e(p: Profile) -> list[list[Run]]:
    full = [(size, False, 0.0) for size in p.e2e_sizes for _ in range(2)]  # through the broker, then managed-ledger
    return [full + [(p.e2e_sizes[0], False, 1_000.0)] * 2]


def _peers(p: Profile) -> list[list[Run]]:
    return [[(p.peer_size, True, 0.0)], [(p.peer_size, False, 0.0)], [(p.peer_size, True, 0.0)]]


def _consume(p: Profile) -> list[list[Run]]:
    backlog_rate = p.consume_backlog / (p.warmup_s + p.duration_s)  # the backlog, as if in one run
    return [[(KIB, True, 0.0), (KIB, True, backlog_rate)]]


CLUSTERS: dict[str, Callable[[Profile], list[list[Run]]]] = {
    "size": _size,
    "latency": _latency,
    "topics": _topics,
    "disks": _disks,
    "e2e-vs-bookie": _e2e,
    "peers": _peers,
    "consume": _consume,
}


def _run_bytes(run: Run, seconds: float) -> float:
    size, batching, rate = run
    if rate <= 0:
        rate = BATCHED_MSG_PER_S_MAX if batching else UNBATCHED_MSG_PER_S_MAX
    return min(rate * size, PAYLOAD_MB_PER_S_MAX * 1e6) * seconds


def planned_writes(scenarios: list[str], profile: Profile, spec: ClusterSpec, probes: dict[str, Any]) -> list[Write]:
    """The run's writes on the journal and the ledger mount: its largest cluster's (all of
    them with ``spec.keep``); the peers' own servers' data (journal mount) counts as one more."""
    journal_dir, ledger_dir = _dirs(spec)
    seconds = profile.warmup_s + profile.duration_s
    copies = spec.quorum[1]
    seq = {m: (probes.get(m) or {}).get("seq_write_mb_per_s") for m in ("journal", "ledgers")}
    shared = probes.get("same_device", journal_dir == ledger_dir)
    per_cluster: list[tuple[str, float, float]] = []
    for name in scenarios:
        for runs in CLUSTERS.get(name, lambda _p: [[(KIB, True, 0.0)]])(profile):
            journal = ledgers = 0.0
            for run in runs:
                payload = _run_bytes(run, seconds) * copies
                j, led = _capped(payload, payload, seq, shared, seconds)
                journal, ledgers = journal + j, ledgers + led
            per_cluster.append((name, journal, ledgers))
        if name == "peers":  # three Redis rows (AOF + rewrites) in one temp dir, after its clusters
            per_cluster.append(("peers' Redis", 3 * 2 * _run_bytes((profile.peer_size, True, 0.0), seconds), 0.0))
    if not per_cluster:
        return []
    if spec.keep:
        what, journal, ledgers = (
            "all scenarios (--keep)",
            sum(c[1] for c in per_cluster),
            sum(c[2] for c in per_cluster),
        )
    else:
        what, journal, ledgers = max(per_cluster, key=lambda c: c[1] + c[2])
    return [Write(journal_dir, journal, f"journals of {what}"), Write(ledger_dir, ledgers, f"entry logs of {what}")]


def check(scenarios: list[str], profile: Profile, spec: ClusterSpec, probes: dict[str, Any]) -> list[str]:
    """:func:`bench.capacity.check_space` of :func:`planned_writes` (raises NotEnoughSpace)."""
    return check_space(
        planned_writes(scenarios, profile, spec, probes),
        "Shorten the run (--duration, --sizes, --scenarios) or give --journal-dir/--ledger-dir on a "
        "mount with more room.",
    )


def _capped(
    journal: float, ledgers: float, seq: dict[str, float | None], shared: bool, seconds: float
) -> tuple[float, float]:
    """Bytes no device can write faster than its probed sequential rate allows."""
    if shared and seq["journal"]:
        limit = seq["journal"] * 1e6 * seconds
        total = journal + ledgers
        if total > limit:
            return journal * limit / total, ledgers * limit / total
        return journal, ledgers
    if seq["journal"]:
        journal = min(journal, seq["journal"] * 1e6 * seconds)
    if seq["ledgers"]:
        ledgers = min(ledgers, seq["ledgers"] * 1e6 * seconds)
    return journal, ledgers


def _dirs(spec: ClusterSpec) -> tuple[Path, Path]:
    temp = Path(tempfile.gettempdir())
    return spec.journal_dir or temp, spec.ledger_dir or temp
