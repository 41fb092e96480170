"""disks: the broker's results next to what the journal and ledger mounts can do.

The mounts were probed before any cluster started (:mod:`bench.suite.probes`). Two runs:
64 KiB messages batched — MB/s against the journal disk's fsync'd sequential write rate —
and 1 KiB unbatched — entries/s against the disk's 4 KiB fsyncs/s, with the device flushes
seen meanwhile (how many entries one group commit carried).

Reading the ratio: with every bookie's journal on the one probed mount, each message byte is
written ``Qw`` times to it (once per bookie of the write quorum), and ``Qw`` more times when
the ledger dirs share the device (the entry logs). So even a perfect broker reaches only
``1 / (Qw × (2 if shared else 1))`` of the probed rate — roughly: ``implied_device_mb_per_s``
(the bytes the bookies wrote to the device, per second) can exceed the probe, which is one
synchronous writer, since several bookies write at once and entry logs sync every 8 MiB.
With ``--disk-model`` the bookies' writers are SIMULATED devices, one per
journal dir and one per ledger dir per bookie; their limits are reported beside the real ones.
"""

from __future__ import annotations

from typing import Any

from bench.suite.context import Context
from bench.suite.perf_adapter import ProduceSpec, produce
from bench.suite.probes import simulated_limits

NAME = "disks"
TITLE = "Disk placement: results against the mounts' limits"
WHAT = (
    "Each mount probed first (4 KiB append + fdatasync, one at a time: fsyncs/s; 512 KiB "
    "groups + fdatasync: sequential MB/s), then 64 KiB batched and 1 KiB unbatched messages "
    "through the broker."
)
LARGE_BYTES = 64 * 1024
SMALL_BYTES = 1024


async def run(ctx: Context) -> dict[str, Any]:
    profile, spec = ctx.profile, ctx.cluster_spec
    probes = ctx.probes
    runs: dict[str, dict[str, Any]] = {}
    async with ctx.cluster() as cluster:
        for key, size, batching in (("large", LARGE_BYTES, True), ("small", SMALL_BYTES, False)):
            ctx.emit(f"{size} B, batching {'on' if batching else 'off'}")
            produce_spec = ProduceSpec(
                topic=f"bench-disks-{size}",
                size_bytes=size,
                batching=batching,
                duration_s=profile.duration_s,
                warmup_s=profile.warmup_s,
                max_outstanding=profile.window(size),
                interval_s=profile.interval_s,
            )
            runs[key] = {
                "size_bytes": size,
                "batching": batching,
                **await ctx.measure(cluster, produce(cluster.service_url, produce_spec, ctx.emit)),
            }
    _, write_quorum, _ = spec.quorum
    shared = bool(probes.get("same_device"))
    amplification = write_quorum * (2 if shared else 1)
    journal = probes["journal"]
    large, small = runs["large"], runs["small"]
    ratio = large["mb_per_s"] / journal["seq_write_mb_per_s"] if journal.get("seq_write_mb_per_s") else None
    result: dict[str, Any] = {
        "probes": probes,
        "rows": [large, small],
        "write_quorum": write_quorum,
        "journal_and_ledgers_share_device": shared,
        "device_bytes_per_message_byte": amplification,
        "mb_per_s_64k": large["mb_per_s"],
        "journal_seq_write_mb_per_s": journal.get("seq_write_mb_per_s"),
        "ratio_64k_to_journal_seq": ratio,
        "implied_device_mb_per_s": large["mb_per_s"] * amplification,
        "implied_device_ratio": ratio * amplification if ratio is not None else None,
        "entries_per_s_1k_unbatched": small["msg_per_s"],
        "journal_fsyncs_per_s_4k": journal.get("fsyncs_per_s_4k"),
        "entries_per_device_flush_1k": (
            small["msg_per_s"] / small["journal_device_flushes_per_s"]
            if small.get("journal_device_flushes_per_s")
            else None
        ),
    }
    simulated = simulated_limits(spec.disk_model)
    if simulated is not None:
        # each bookie has its own SIMULATED journal device (and ledger device unless same_device)
        same = "same_device=1" in (spec.disk_model or "")
        bound = spec.bookies * simulated["seq_write_mb_per_s"] / (write_quorum * (2 if same else 1))
        result["simulated"] = simulated | {
            "bound_mb_per_s": bound,
            "ratio_64k_to_simulated_seq": large["mb_per_s"] / simulated["seq_write_mb_per_s"],
            "ratio_of_simulated_bound": large["mb_per_s"] / bound,
        }
    return result
