"""Redis Streams against its own C client: ``redis-benchmark -P 100 -c 10`` running ``XADD``.

The row that shows the server's own ceiling beside the Python-client rows: the same
``redis-server`` (:func:`bench.peers.redis_streams.server_argv`, ``appendfsync always``, data
on the journal mount), driven by Debian's ``redis-benchmark`` (package ``redis-tools``) with
10 connections pipelining 100 commands each: ``XADD bench-stream * f <value>``, the value a
literal of ``size_bytes`` bytes on the command line. (redis-benchmark 7.0 substitutes
``__data__`` only in its built-in tests, not in a custom command: ``-d 1024 ... f __data__``
would store the 8 bytes ``__data__``. The run therefore reads one entry back and fails when
its field is not ``size_bytes`` long.)

redis-benchmark has no time limit, only ``-n``: a short calibration run (also the warm-up)
gives the rate, and the measured run has ``rate × duration_s`` requests. Its figures are its
own (``--csv``: requests/s and client-side latency percentiles of pipelined requests, not
coordinated-omission corrected: it sends as fast as replies come). No consumer runs.
"""

from __future__ import annotations

import asyncio
import csv
import io
import shutil
from pathlib import Path
from typing import Any

from bench.common import process_cpu_s
from bench.peers.redis_streams import server_argv
from bench.peers.resp import RespConnection
from bench.peers.server import free_port, running_server
from bench.peers.workload import PeerWorkload

PIPELINE = 100
CLIENTS = 10
STREAM = "bench-stream"
CALIBRATION_REQUESTS = 50_000
MB = 1_000_000
DURABILITY = (
    "appendonly yes, appendfsync always (one fsync per event-loop round); "
    f"redis-benchmark -P {PIPELINE} -c {CLIENTS}, no consumer"
)


def unavailable_reason() -> str | None:
    """None when redis-server and redis-benchmark are on PATH; else why this row is skipped."""
    for binary, package in (("redis-server", "redis-server"), ("redis-benchmark", "redis-tools")):
        if shutil.which(binary) is None:
            return f"{binary} not found (make bench-peers tries `apt-get install -y {package}`)"
    return None


def benchmark_argv(port: int, requests: int, size_bytes: int) -> list[str]:
    return [
        "redis-benchmark",
        "-p",
        str(port),
        "-P",
        str(PIPELINE),
        "-c",
        str(CLIENTS),
        "-n",
        str(requests),
        "--csv",
        "XADD",
        STREAM,
        "*",
        "f",
        "x" * size_bytes,
    ]


def parse_csv(text: str) -> dict[str, float]:
    """redis-benchmark ``--csv``'s one data row: ``rps`` and ``*_latency_ms`` as floats."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1:
        raise RuntimeError(f"redis-benchmark printed {len(rows)} result rows: {text[-300:]!r}")
    return {key: float(value) for key, value in rows[0].items() if key != "test"}


async def run(data_dir: Path, log_path: Path, workload: PeerWorkload, emit: Any) -> dict[str, Any]:
    """One row: calibrate, then ``rate × duration_s`` XADDs against a fresh redis-server."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with running_server(server_argv(port, data_dir, "always"), port, log_path) as server:
        calibration = await _benchmark(port, CALIBRATION_REQUESTS, workload.size_bytes)
        requests = max(CALIBRATION_REQUESTS, int(calibration["rps"] * workload.duration_s))
        emit(f"  calibration {calibration['rps']:,.0f} req/s; measuring {requests:,} XADDs")
        cpu_before_s = process_cpu_s(server.pid)
        measured = await _benchmark(port, requests, workload.size_bytes)
        server_cpu_s = process_cpu_s(server.pid) - cpu_before_s
        stored, version = await _check_stored(port, workload.size_bytes)
    rate, size = measured["rps"], workload.size_bytes
    return {
        "msg_per_s": rate,
        "mb_per_s": rate * workload.size_bytes / MB,
        "messages": requests,
        "latency": {
            "mean_ms": measured.get("avg_latency_ms"),
            "p50_ms": measured.get("p50_latency_ms"),
            "p95_ms": measured.get("p95_latency_ms"),
            "p99_ms": measured.get("p99_latency_ms"),
            "max_ms": measured.get("max_latency_ms"),
        },
        "own_client": True,
        "latency_note": "redis-benchmark's own (pipelined, not coordinated-omission corrected)",
        "stored_value_bytes": stored,
        "server_cpu_us_per_msg": server_cpu_s / requests * 1e6,
        "server_version": version,
        "durability": DURABILITY,
        "aof_rewrites": _aof_rewrites(log_path),
        "client": f"redis-benchmark -P {PIPELINE} -c {CLIENTS} -n {requests} XADD {STREAM} * f <{size} B>",
    }


async def _benchmark(port: int, requests: int, size_bytes: int) -> dict[str, float]:
    process = await asyncio.create_subprocess_exec(
        *benchmark_argv(port, requests, size_bytes),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await process.communicate()
    finally:
        if process.returncode is None:  # cancelled (SIGINT, a failing run): leave no client behind
            process.kill()
            await process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"redis-benchmark exited with {process.returncode}: {err.decode(errors='replace')[-300:]}")
    return parse_csv(out.decode())


async def _check_stored(port: int, size_bytes: int) -> tuple[int, str]:
    """The field length of the stream's first entry (must be ``size_bytes``) and the server version."""
    connection = await RespConnection.open("127.0.0.1", port)
    try:
        entries = await connection.call("XRANGE", STREAM, "-", "+", "COUNT", 1)
        stored = len(entries[0][1][1])
        info = (await connection.call("INFO", "server")).decode()
    finally:
        connection.close()
    if stored != size_bytes:
        raise RuntimeError(f"redis-benchmark stored {stored}-byte values, not {size_bytes}")
    return stored, info.split("redis_version:")[1].split()[0]


def _aof_rewrites(log_path: Path) -> int:
    """Background AOF rewrites the server started (Redis's defaults rewrite as the file grows)."""
    try:
        return log_path.read_text(errors="replace").count("Background append only file rewriting started")
    except OSError:
        return 0
