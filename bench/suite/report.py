"""The run's files: each scenario's JSON, and ``summary.md`` — every JSON of a run directory
as one Markdown page a person can read at a glance, the headline figures first, then a table
per scenario. Built only from the JSON files, so a report can be rebuilt (or extended with ``--into``) at any time.

Units: msg/s, decimal MB/s (10^6 B/s), latencies in ms; "flushes/s" are the journal device's
FLUSH requests per second during the run (/proc/diskstats, system-wide for that device).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.suite.scenarios import SCENARIOS

KIB = 1024


def write_json(path: Path, data: dict[str, Any]) -> None:
    """One scenario's (or the run's) figures, indented; anything not JSON-native as text."""
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def load_results(run_dir: Path) -> dict[str, dict[str, Any]]:
    """``{scenario: its JSON}`` for every scenario file in ``run_dir``, in the scenarios' order."""
    results = {}
    for name in SCENARIOS:
        path = run_dir / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
    return results


# -- formatting ---------------------------------------------------------------------------------


def num(value: Any, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)


def ms(value: Any) -> str:
    return num(value, ".2f")


def size(value: int) -> str:
    if value >= KIB and value % KIB == 0:
        return f"{value // KIB} KiB"
    return f"{value} B"


def table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    """A Markdown table; ``align``: one letter per column, ``l`` or ``r`` (default: first left)."""
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---" if a == "l" else "---:" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def lat(row: dict[str, Any], key: str) -> str:
    return ms((row.get("latency") or {}).get(key))


# -- headline -----------------------------------------------------------------------------------


def headline(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures the issue asks to quote, where this run measured them."""
    figures: dict[str, Any] = {}
    for row in results.get("size", {}).get("rows", []):
        if row.get("size_bytes") == KIB and row.get("batching"):
            figures["batched_1k_msg_per_s"] = row["msg_per_s"]
            figures["batched_1k_mb_per_s"] = row["mb_per_s"]
    for row in results.get("latency", {}).get("rows", []):
        if row.get("target_rate") == 10_000:
            # coordinated omission corrected where the run measured it (perf's intended-time latency)
            corrected = row.get("intended_latency") or row["latency"]
            figures["p99_ms_at_10k"] = corrected["p99_ms"]
            figures["max_ms_at_10k"] = corrected["max_ms"]
            figures["achieved_at_10k"] = row["msg_per_s"]
    disks = results.get("disks", {})
    if disks.get("ratio_64k_to_journal_seq") is not None:
        figures["ratio_64k_to_journal_seq"] = disks["ratio_64k_to_journal_seq"]
        figures["mb_per_s_64k"] = disks["mb_per_s_64k"]
        figures["journal_seq_write_mb_per_s"] = disks["journal_seq_write_mb_per_s"]
        figures["implied_device_ratio"] = disks.get("implied_device_ratio")
        if disks.get("simulated"):
            figures["ratio_64k_to_simulated_seq"] = disks["simulated"]["ratio_64k_to_simulated_seq"]
            figures["simulated_seq_write_mb_per_s"] = disks["simulated"]["seq_write_mb_per_s"]
    peers = results.get("peers", {})
    reference = next((r for r in peers.get("rows", []) if r.get("system") == peers.get("reference")), None)
    if reference is not None:
        figures["peer_ratios"] = {
            r["system"]: r["minipulsar_ratio"]
            for r in peers["rows"]
            if not r["system"].startswith("minipulsar") and r.get("minipulsar_ratio") is not None
        }
    for row in results.get("consume", {}).get("rows", []):
        figures[f"consume_{row['mode'].replace('-', '_')}_msg_per_s"] = row["consume_msg_per_s"]
    figures["simulated"] = any(r.get("simulated_disk_model") for r in results.values())
    return figures


def headline_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    h = headline(results)
    lines = []
    if "batched_1k_msg_per_s" in h:
        lines.append(
            f"batched single-producer 1 KiB: {h['batched_1k_msg_per_s']:,.0f} msg/s "
            f"({h['batched_1k_mb_per_s']:.1f} MB/s)"
        )
    if "p99_ms_at_10k" in h:
        lines.append(
            f"p99 publish latency at 10,000 msg/s: {h['p99_ms_at_10k']:.2f} ms, max {h['max_ms_at_10k']:.2f} ms "
            f"(coordinated omission corrected; achieved {h['achieved_at_10k']:,.0f} msg/s)"
        )
    if "ratio_64k_to_journal_seq" in h:
        lines.append(
            f"64 KiB: {h['mb_per_s_64k']:.1f} MB/s = {h['ratio_64k_to_journal_seq']:.3f} of the journal "
            f"disk's {h['journal_seq_write_mb_per_s']:,.0f} MB/s fsync'd sequential writes"
        )
    if "ratio_64k_to_simulated_seq" in h:
        lines.append(
            f"64 KiB vs the SIMULATED disk's {h['simulated_seq_write_mb_per_s']:,.0f} MB/s per bookie device: "
            f"{h['ratio_64k_to_simulated_seq']:.3f}"
        )
    if "consume_tailing_msg_per_s" in h or "consume_catch_up_msg_per_s" in h:
        lines.append(
            f"consume 1 KiB: tailing {num(h.get('consume_tailing_msg_per_s'))} msg/s, "
            f"catch-up {num(h.get('consume_catch_up_msg_per_s'))} msg/s"
        )
    for system, ratio in h.get("peer_ratios", {}).items():
        lines.append(f"minipulsar (batched) / {system}: {ratio:.2f}x msg/s")
    if h["simulated"]:
        lines = [f"SIMULATED disk: {line}" for line in lines]
    return lines


# -- the page -----------------------------------------------------------------------------------


def write_summary(run_dir: Path, run_info: dict[str, Any], results: dict[str, dict[str, Any]]) -> Path:
    lines = [f"# minipulsar bench — {run_dir.name}", ""]
    simulated = run_info.get("simulated_disk_model") or next(
        (r["simulated_disk_model"] for r in results.values() if r.get("simulated_disk_model")), None
    )
    if simulated:
        lines += [
            f"> **SIMULATED DISK** — {simulated['label']}. The bookies' journal and entry-log writers "
            "wait as the modelled device would; the figures below are not this machine's disk.",
            "",
        ]
    cluster = run_info.get("cluster", {})
    last = (run_info.get("runs") or [{}])[-1]
    env = last.get("environment", {})
    lines += [
        f"Profile **{run_info.get('profile')}**; cluster: {cluster.get('bookies')} bookies, 1 broker, "
        f"E/Qw/Qa {cluster.get('ensemble')}/{cluster.get('write_quorum')}/{cluster.get('ack_quorum')}, "
        f"journalSyncData={'true' if cluster.get('journal_sync') else 'false'}; journal dir "
        f"`{cluster.get('journal_dir')}`, ledger dir `{cluster.get('ledger_dir')}`.",
        f"Machine: {env.get('cpus')} CPUs, Python {env.get('python')} ({env.get('loop')}), load average at start "
        f"{', '.join(f'{x:.1f}' for x in env.get('load_avg_at_start', []))}. Load generator: {env.get('engine')}, "
        "in the bench process (it shares the CPUs with the servers).",
        "Units: msg/s; MB/s = 10^6 bytes/s; latency in ms (send → broker receipt, HdrHistogram); "
        "flushes/s = FLUSH requests/s of the journal's block device during the run (/proc/diskstats).",
        "",
    ]
    lines += _headline_section(results)
    lines += _probes_section(run_info.get("probes") or {}, simulated)
    for name, result in results.items():
        lines += [
            f"## {name}: {result.get('title')}{' (SIMULATED disk)' if result.get('simulated_disk_model') else ''}",
            "",
            result.get("what", ""),
            "",
        ]
        if result.get("error"):
            lines += [f"**FAILED**: `{result['error']}`", ""]
        section = SECTIONS.get(name)
        if section is not None and result.get("rows"):
            lines += section(result)
        lines += [f"_{result.get('elapsed_s', 0):.0f} s; charts: see the PNG files beside this page._", ""]
    path = run_dir / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _headline_section(results: dict[str, dict[str, Any]]) -> list[str]:
    h = headline(results)
    if len(h) <= 1:
        return []
    rows = []
    if "batched_1k_msg_per_s" in h:
        rows.append(
            [
                "batched single-producer throughput, 1 KiB",
                f"{h['batched_1k_msg_per_s']:,.0f} msg/s ({h['batched_1k_mb_per_s']:.1f} MB/s)",
            ]
        )
    if "p99_ms_at_10k" in h:
        rows.append(
            [
                "p99 / max publish latency at 10,000 msg/s (coordinated omission corrected)",
                f"{h['p99_ms_at_10k']:.2f} / {h['max_ms_at_10k']:.2f} ms",
            ]
        )
    if "ratio_64k_to_journal_seq" in h:
        rows.append(
            [
                "64 KiB MB/s ÷ journal disk's fsync'd sequential MB/s",
                f"{h['ratio_64k_to_journal_seq']:.3f} ({h['mb_per_s_64k']:.1f} / "
                f"{h['journal_seq_write_mb_per_s']:,.0f})",
            ]
        )
    if "ratio_64k_to_simulated_seq" in h:
        rows.append(
            [
                "64 KiB MB/s ÷ SIMULATED disk's sequential MB/s (per bookie device)",
                f"{h['ratio_64k_to_simulated_seq']:.3f}",
            ]
        )
    for mode in ("tailing", "catch_up"):
        if f"consume_{mode}_msg_per_s" in h:
            rows.append([f"{mode.replace('_', '-')} consume, 1 KiB", f"{h[f'consume_{mode}_msg_per_s']:,.0f} msg/s"])
    for system, ratio in h.get("peer_ratios", {}).items():
        rows.append([f"minipulsar batched msg/s ÷ {system}", f"{ratio:.2f}"])
    return (
        ["## Headline" + (" (SIMULATED disk)" if h["simulated"] else ""), ""]
        + table(["figure", "value"], rows, "lr")
        + [""]
    )


def _probes_section(probes: dict[str, Any], simulated: dict[str, Any] | None) -> list[str]:
    if not probes:
        return []
    rows = []
    for mount in ("journal", "ledgers"):
        p = probes.get(mount)
        if p:
            rows.append(
                [
                    mount,
                    f"`{p['path']}`",
                    str(p.get("device")),
                    num(p.get("fsyncs_per_s_4k")),
                    ms(p.get("fsync_4k_ms_avg")),
                    num(p.get("seq_write_mb_per_s")),
                    num(p.get("device_flushes_per_s_4k")),
                ]
            )
    if simulated:
        rows.append(
            [
                "SIMULATED (each bookie's writers)",
                "",
                simulated["label"],
                num(simulated["fsyncs_per_s_4k"]),
                ms(simulated["fsync_ms"]),
                num(simulated["seq_write_mb_per_s"]),
                "",
            ]
        )
    lines = ["## Disk probes (before any cluster)", ""]
    lines += table(
        [
            "mount",
            "path",
            "device",
            "fsyncs/s (4 KiB)",
            "fsync ms",
            "seq. MB/s (512 KiB + fdatasync)",
            "device flushes/s during 4 KiB probe",
        ],
        rows,
        "lllrrrr",
    )
    if probes.get("same_device"):
        lines += ["", "Journal and ledger dirs are on the same device (probed once)."]
    if probes.get("idle_journal_device_flushes_per_s") is not None:
        lines += [
            "",
            f"Background: {num(probes['idle_journal_device_flushes_per_s'])} flushes/s on the journal device "
            "with the bench idle (other work on the machine); the per-row flush figures include it.",
        ]
    return lines + [""]


def _size(result: dict[str, Any]) -> list[str]:
    rows = [
        [
            size(r["size_bytes"]),
            "on" if r["batching"] else "off",
            num(r["msg_per_s"]),
            num(r["mb_per_s"], ",.1f"),
            lat(r, "p50_ms"),
            lat(r, "p99_ms"),
            lat(r, "p999_ms"),
            num(r.get("failures")),
            num(r.get("journal_device_flushes_per_s")),
        ]
        for r in result["rows"]
    ]
    return table(["size", "batching", "msg/s", "MB/s", "p50", "p99", "p99.9", "failed", "flushes/s"], rows) + [""]


def _latency(result: dict[str, Any]) -> list[str]:
    rows = [
        [
            num(r["target_rate"]),
            num(r["msg_per_s"]),
            lat(r, "p50_ms"),
            lat(r, "p95_ms"),
            lat(r, "p99_ms"),
            lat(r, "p999_ms"),
            lat(r, "max_ms"),
            ms((r.get("intended_latency") or {}).get("p99_ms")),
            ms((r.get("intended_latency") or {}).get("max_ms")),
            "**saturated**" if r.get("saturated") else "",
            num(r.get("journal_device_flushes_per_s")),
        ]
        for r in result["rows"]
    ]
    header = ["target msg/s", "achieved", "p50", "p95", "p99", "p99.9", "max", "p99 (CO)", "max (CO)", ""]
    return table([*header, "flushes/s"], rows) + [
        "",
        "*(CO)*: from each message's intended send time (its rate-limiter permit), corrected for"
        " coordinated omission; the other columns are pulsar-perf's, from the `send_async` call.",
        "",
    ]


def _topics(result: dict[str, Any]) -> list[str]:
    rows = []
    for r in result["rows"]:
        memory = r.get("memory") or {}
        rows.append(
            [
                num(r["topics"]),
                num(r["target_rate"]),
                num(r["msg_per_s"]),
                lat(r, "p50_ms"),
                lat(r, "p99_ms"),
                num(r.get("setup_s"), ".1f"),
                f"{num(r.get('broker_rss_mb_start'))} → {num(memory.get('broker_rss_mb'))}",
                num(r.get("broker_kb_per_topic"), ".1f"),
                f"{num(r.get('bookie_rss_mb_start'))} → {num(memory.get('bookie_rss_mb_max'))}",
                num(r.get("journal_device_flushes_per_s")),
            ]
        )
    return table(
        [
            "topics",
            "target msg/s",
            "achieved",
            "p50",
            "p99",
            "set-up s",
            "broker RSS MB (start → after)",
            "broker KB/topic",
            "max bookie RSS MB (start → after)",
            "flushes/s",
        ],
        rows,
    ) + [""]


def _disks(result: dict[str, Any]) -> list[str]:
    large, small = result["rows"][0], result["rows"][1]
    lines = table(
        ["run", "msg/s", "MB/s", "p99", "journal flushes/s", "against"],
        [
            [
                "64 KiB, batched",
                num(large["msg_per_s"]),
                num(large["mb_per_s"], ",.1f"),
                lat(large, "p99_ms"),
                num(large.get("journal_device_flushes_per_s")),
                f"journal seq. {num(result.get('journal_seq_write_mb_per_s'))} MB/s → ratio "
                f"**{num(result.get('ratio_64k_to_journal_seq'), '.3f')}**",
            ],
            [
                "1 KiB, unbatched",
                num(small["msg_per_s"]),
                num(small["mb_per_s"], ",.1f"),
                lat(small, "p99_ms"),
                num(small.get("journal_device_flushes_per_s")),
                f"journal {num(result.get('journal_fsyncs_per_s_4k'))} fsyncs/s (4 KiB); "
                f"{num(result.get('entries_per_device_flush_1k'), ',.1f')} entries per device flush",
            ],
        ],
        "lrrrrl",
    )
    times = result["device_bytes_per_message_byte"]
    lines += [
        "",
        f"Each message byte reaches the journal device {times}× (Qw={result['write_quorum']} journals"
        f"{', plus the entry logs on the same device' if result.get('journal_and_ledgers_share_device') else ''}"
        f"): the bookies together wrote ~{num(result.get('implied_device_mb_per_s'))} MB/s to it, "
        f"**{num(result.get('implied_device_ratio'), '.2f')}×** the probe's single synchronous writer "
        "(several writers, and entry-log flushes that sync every 8 MiB, can beat it).",
    ]
    simulated = result.get("simulated")
    if simulated:
        lines += [
            "",
            f"SIMULATED ({simulated['label']}): per-bookie device {num(simulated['seq_write_mb_per_s'])} MB/s; "
            f"cluster ceiling {num(simulated['bound_mb_per_s'], ',.1f')} MB/s of messages; the 64 KiB run "
            f"reached {num(simulated['ratio_of_simulated_bound'], '.2f')} of it.",
        ]
    return lines + [""]


def _e2e(result: dict[str, Any]) -> list[str]:
    rows = []
    for r in result["rows"]:
        e2e, ml = r["e2e"], r["managed_ledger"]
        rows.append(
            [
                size(r["size_bytes"]),
                f"{num(r['rate'])}/s" if r.get("rate") else "full speed",
                num(e2e["msg_per_s"]),
                num(ml["msg_per_s"]),
                num(r.get("throughput_ratio"), ".2f"),
                f"{lat(e2e, 'p50_ms')} / {lat(e2e, 'p99_ms')}",
                f"{lat(ml, 'p50_ms')} / {lat(ml, 'p99_ms')}",
                f"{ms(r.get('p50_added_ms'))} / {ms(r.get('p99_added_ms'))}",
            ]
        )
    return table(
        [
            "entry",
            "pace",
            "end-to-end msg/s",
            "managed-ledger msg/s",
            "e2e ÷ ML",
            "e2e p50 / p99",
            "ML p50 / p99",
            "broker adds p50 / p99",
        ],
        rows,
    ) + [""]


def _peers(result: dict[str, Any]) -> list[str]:
    rows = []
    for r in result["rows"]:
        if r.get("skipped"):
            rows.append([r["system"], f"skipped: {r['skipped']}", "", "", "", "", "", "", ""])
            continue
        rows.append(
            [
                r["system"],
                r.get("durability", ""),
                num(r["msg_per_s"]),
                num(r["mb_per_s"], ",.1f"),
                lat(r, "p50_ms"),
                lat(r, "p99_ms"),
                num(r.get("receive_msg_per_s")),
                num(r.get("journal_device_flushes_per_s")),
                num(r.get("minipulsar_ratio"), ".2f"),
            ]
        )
    lines = [f"{size(result['size_bytes'])} messages, window {num(result['max_outstanding'])}.", ""]
    for r in result["rows"]:
        if r.get("own_client") and not r.get("skipped"):
            lines += [
                f"*{r['system']}*: the server's own ceiling, `{r['client']}`; latency is {r['latency_note']}; "
                f"no consumer; server CPU {num(r.get('server_cpu_us_per_msg'), '.2f')} µs/msg, "
                f"{r.get('aof_rewrites', 0)} AOF rewrite(s).",
                "",
            ]
    return (
        lines
        + table(
            [
                "system",
                "durability",
                "produce msg/s",
                "MB/s",
                "p50",
                "p99",
                "consume msg/s",
                "device flushes/s",
                f"{result['reference']} ÷ this",
            ],
            rows,
            "llrrrrrrr",
        )
        + [""]
    )


def _consume(result: dict[str, Any]) -> list[str]:
    rows = []
    for r in result["rows"]:
        cpu = r.get("cpu_us_per_msg") or {}
        rows.append(
            [
                r["mode"],
                num(r["consume_msg_per_s"]),
                num(r.get("consumed")),
                num(r.get("produce_msg_per_s") or r.get("backlog_publish_msg_per_s")),
                num(cpu.get("bench"), ".2f"),
                num(cpu.get("broker"), ".2f"),
                num(cpu.get("bookies"), ".2f"),
                num(r.get("journal_device_flushes_per_s")),
            ]
        )
    header = ["mode", "consume msg/s", "received", "produce msg/s", "clients µs/msg", "broker µs/msg"]
    header += ["bookies µs/msg", "device flushes/s"]
    note = (
        "Tailing: the bench process runs producer and consumer (its CPU is both); catch-up: the "
        "consumer alone, the produce column the backlog's publish rate."
    )
    return [note, ""] + table(header, rows, "lrrrrrrr") + [""]


SECTIONS = {
    "size": _size,
    "latency": _latency,
    "topics": _topics,
    "disks": _disks,
    "e2e-vs-bookie": _e2e,
    "consume": _consume,
    "peers": _peers,
}
