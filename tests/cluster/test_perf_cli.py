"""``minipulsar perf produce | consume | managed-ledger`` as processes against real clusters
(a long run, scaled down).

One metastore + bookie + broker cluster serves the produce/consume tests (distinct topics);
managed-ledger gets its own cluster of two bookies and no broker.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import pytest

from minipulsar import Client, InitialPosition, Timeout
from minipulsar.bookkeeper.ledger_metadata import LedgerMetadata, LedgerState, ledger_path
from minipulsar.metadata import open_metadata_store
from tests.support.cluster import make_cluster
from tests.support.fixtures import cluster_fixture
from tests.support.net import unused_port
from tests.support.web import put_partitions

pytestmark = pytest.mark.asyncio(loop_scope="module")

MS = r"\s*\d+\.\d{3}"
PRODUCED_LINE = re.compile(
    rf"^Throughput produced:\s+\d+ msg ---\s+\d+\.\d msg/s ---\s+\d+\.\d Mbit/s --- failure\s+\d+\.\d msg/s"
    rf" --- Latency: mean:{MS} ms - med:{MS} - 95pct:{MS} - 99pct:{MS} - 99\.9pct:{MS} - 99\.99pct:{MS}"
    rf" - Max:{MS}$"
)
LEDGER_LINE = re.compile(
    rf"^Throughput produced:\s+\d+ msg ---\s+\d+\.\d msg/s ---\s+\d+\.\d Mbit/s"
    rf" --- Latency: mean:{MS} ms - med:{MS} - 95pct:{MS} - 99pct:{MS} - 99\.9pct:{MS} - 99\.99pct:{MS}"
    rf" - Max:{MS}$"
)
RECEIVED_LINE = re.compile(
    r"^Throughput received:\s+\d+ msg --- \d+\.\d{3} msg/s --- \d+\.\d{3} Mbit/s --- Latency: mean: \d+\.\d{3} ms"
    r" - med: \d+ - 95pct: \d+ - 99pct: \d+ - 99\.9pct: \d+ - 99\.99pct: \d+ - Max: \d+$"
)
SENT_AGGREGATE = re.compile(
    r"^Aggregated throughput stats --- (\d+) records sent --- \d+\.\d{3} msg/s"
    r" --- \d+\.\d{3} Mbit/s$"
)
LATENCY_AGGREGATE = re.compile(
    rf"^Aggregated latency stats --- Latency: mean:{MS} ms - med:{MS} - 95pct:{MS} - 99pct:{MS}"
    rf" - 99\.9pct:{MS} - 99\.99pct:{MS} - 99\.999pct:{MS} - Max:{MS}$"
)
RUN_TIMEOUT_S = 60


cluster = cluster_fixture(per_module=True)


async def start_perf(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "minipulsar",
        "perf",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )


async def finish(process: asyncio.subprocess.Process) -> tuple[int, list[str], str]:
    """Exit code, stdout lines, stderr of a perf process (killed if it overruns)."""
    try:
        out, err = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_S)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode, out.decode().splitlines(), err.decode()


async def perf(*args: str) -> tuple[int, list[str], str]:
    return await finish(await start_perf(*args))


def matching(pattern: re.Pattern, lines: list[str]) -> list[re.Match]:
    return [m for line in lines if (m := pattern.match(line))]


async def test_produce_prints_periodic_lines_the_aggregate_and_json(cluster, tmp_path: Path) -> None:
    """Goal: ``perf produce my-topic -r 2000 -s 1024 -time 3 -i 1 --json F`` prints pulsar-perf's
    periodic line each second and its two aggregate lines, holds the rate, and writes the
    same figures as JSON."""
    report = tmp_path / "produce.json"
    code, lines, err = await perf(
        "produce",
        "my-topic",
        "-u",
        cluster.service_url,
        "-r",
        "2000",
        "-s",
        "1024",
        "-time",
        "3",
        "-i",
        "1",
        "--json",
        str(report),
    )
    assert code == 0, err
    assert len(matching(PRODUCED_LINE, lines)) >= 2, lines
    (sent,) = matching(SENT_AGGREGATE, lines)
    assert len(matching(LATENCY_AGGREGATE, lines)) == 1, lines
    result = json.loads(report.read_text())
    assert result["mode"] == "produce" and result["latency_kind"] == "publish"
    assert result["messages"] == int(sent.group(1))
    assert 0.85 * 6000 <= result["messages"] <= 6100
    assert result["msg_per_s"] == pytest.approx(2000, rel=0.15)
    assert result["bytes"] == result["messages"] * 1024 and result["failures"] == 0
    assert result["duration_s"] == pytest.approx(3, abs=0.8)
    assert result["mbit_per_s"] == pytest.approx(result["msg_per_s"] * 1024 * 8 / 1024 / 1024, rel=0.01)
    latency = result["latency"]
    assert 0 < latency["count"] < result["messages"], "the 1 s warm-up is not in the latencies"
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["p999_ms"] <= latency["max_ms"]
    assert len(result["intervals"]) >= 2 and result["targets"] == ["persistent://public/default/my-topic"]


async def test_consume_with_produce_reports_end_to_end_latency(cluster, tmp_path: Path) -> None:
    """Goal: ``perf consume`` run together with ``perf produce`` receives and acknowledges
    every message, prints its periodic line with the end-to-end latency and its aggregates.
    Method: consume (from Latest, the default) until -m 3000; once its first periodic line
    shows it subscribed, produce 3000 at 3000 msg/s."""
    report = tmp_path / "consume.json"
    consumer = await start_perf(
        "consume", "e2e", "-u", cluster.service_url, "-m", "3000", "-time", "40", "-i", "0.5", "--json", str(report)
    )
    try:
        first = (await asyncio.wait_for(consumer.stdout.readline(), RUN_TIMEOUT_S)).decode().rstrip("\n")
        producer = await start_perf("produce", "e2e", "-u", cluster.service_url, "-r", "3000", "-m", "3000", "-i", "1")
        p_code, p_lines, p_err = await finish(producer)
    finally:
        c_code, c_lines, c_err = await finish(consumer)
    assert p_code == 0, p_err
    assert [int(m.group(1)) for m in matching(SENT_AGGREGATE, p_lines)] == [3000]
    assert c_code == 0, c_err
    assert RECEIVED_LINE.match(first), first
    assert len(matching(RECEIVED_LINE, c_lines)) >= 1, c_lines  # producing 3000 at 3000 msg/s takes 1 s
    assert any(
        line.startswith("Aggregated throughput stats --- 3000 records received --- ")
        and line.endswith(" --- ack failed 0 msg")
        for line in c_lines
    ), c_lines
    assert any(
        re.match(
            r"^Aggregated latency stats --- Latency: mean: \d+\.\d{3} ms - med: \d+ .* - 99\.999pct: \d+"
            r" - Max: \d+$",
            line,
        )
        for line in c_lines
    ), c_lines
    result = json.loads(report.read_text())
    assert (result["mode"], result["latency_kind"], result["messages"], result["acks"]) == (
        "consume",
        "end-to-end",
        3000,
        3000,
    )
    assert result["latency"]["count"] == 3000 and result["latency"]["max_ms"] >= result["latency"]["p50_ms"]


async def test_produce_to_a_partitioned_topic_spreads_over_its_partitions(cluster, tmp_path: Path) -> None:
    """Goal: ``perf produce`` on a partitioned topic sends every message (a partitioned
    producer's ``send_async`` returns no future to wait on). Method: 3 partitions, -m 600 at
    2000 msg/s unbatched; then each partition's backlog read from Earliest adds up to 600."""
    await asyncio.to_thread(put_partitions, cluster, "perf-partitioned", 3)
    report = tmp_path / "partitioned.json"
    code, lines, err = await perf(
        "produce",
        "perf-partitioned",
        "-u",
        cluster.service_url,
        "-r",
        "2000",
        "-m",
        "600",
        "-db",
        "--json",
        str(report),
    )
    assert code == 0, err
    assert [int(m.group(1)) for m in matching(SENT_AGGREGATE, lines)] == [600], lines
    result = json.loads(report.read_text())
    assert (result["messages"], result["failures"]) == (600, 0)
    async with Client(cluster.service_url) as client:
        counts = [await backlog(client, f"perf-partitioned-partition-{index}") for index in range(3)]
    assert sum(counts) == 600 and min(counts) > 0, counts


async def backlog(client: Client, topic: str) -> int:
    """Messages on ``topic``, read from Earliest until none comes within a second."""
    consumer = await client.subscribe(topic, "count", initial_position=InitialPosition.Earliest)
    count = 0
    try:
        while True:
            await consumer.receive(timeout_millis=1000)
            count += 1
    except Timeout:
        return count
    finally:
        await consumer.close()


async def test_ctrl_c_prints_the_aggregate_writes_json_and_exits_130(cluster, tmp_path: Path) -> None:
    """Goal: Ctrl-C ends an open-ended run cleanly: the aggregate lines, the JSON (marked
    interrupted), exit code 130. Method: SIGINT once the first periodic line is out."""
    report = tmp_path / "interrupted.json"
    process = await start_perf(
        "produce", "ctrl-c", "-u", cluster.service_url, "-r", "500", "-i", "0.5", "--json", str(report)
    )
    try:
        first = await asyncio.wait_for(process.stdout.readline(), RUN_TIMEOUT_S)
        assert PRODUCED_LINE.match(first.decode().rstrip("\n")), first
        process.send_signal(signal.SIGINT)
    finally:
        code, lines, err = await finish(process)
    assert code == 130, err
    assert matching(SENT_AGGREGATE, lines) and matching(LATENCY_AGGREGATE, lines), lines
    result = json.loads(report.read_text())
    assert result["interrupted"] is True and result["messages"] > 0


async def test_managed_ledger_writes_to_the_bookies_without_a_broker(tmp_path: Path) -> None:
    """Goal: ``perf managed-ledger`` writes through the BookKeeper client alone (metastore and
    two bookies, no broker) with the -e/-w/-a quorums asked for, and prints the lines.
    Method: -e 2 -w 2 -a 2 on 2 ledgers; then read the ledgers' metadata: closed, on both
    bookies, holding every entry counted."""
    report = tmp_path / "ledger.json"
    async with make_cluster(tmp_path / "cluster", bookies=2, brokers=0) as cluster:
        code, lines, err = await perf(
            "managed-ledger",
            "-md",
            cluster.metadata_url,
            "-e",
            "2",
            "-w",
            "2",
            "-a",
            "2",
            "-t",
            "2",
            "-r",
            "2000",
            "-s",
            "512",
            "-time",
            "2",
            "-i",
            "1",
            "--json",
            str(report),
        )
        assert code == 0, err
        assert matching(LEDGER_LINE, lines), lines
        assert matching(SENT_AGGREGATE, lines) and matching(LATENCY_AGGREGATE, lines), lines
        result = json.loads(report.read_text())
        assert result["mode"] == "managed-ledger" and result["latency_kind"] == "add-entry"
        assert result["msg_per_s"] == pytest.approx(2000, rel=0.2) and result["failures"] == 0
        store = await open_metadata_store(cluster.metadata_url)
        try:
            entries = 0
            for ledger_id in map(int, result["targets"]):
                found = await store.get(ledger_path(ledger_id))
                assert found is not None, f"ledger {ledger_id} has no metadata"
                metadata = LedgerMetadata.from_bytes(ledger_id, found.value, found.version)
                assert metadata.state is LedgerState.CLOSED and len(set(metadata.ensembles[0][1])) == 2
                assert (metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum) == (2, 2, 2)
                entries += metadata.last_entry_id + 1
        finally:
            await store.close()
        assert entries == result["messages"]


async def test_an_unreachable_cluster_is_one_error_line_and_exit_1() -> None:
    port = unused_port()
    (code, lines, err), (ml_code, _, ml_err) = await asyncio.gather(
        perf("produce", "t", "-u", f"pulsar://127.0.0.1:{port}", "--operation-timeout", "1", "-time", "1"),
        perf("managed-ledger", "-md", f"metastore://127.0.0.1:{port}", "-time", "1"),
    )
    assert code == 1 and not lines
    assert err.startswith(f"error: perf produce against pulsar://127.0.0.1:{port}: ConnectionClosedError:"), err
    assert "cannot connect" in err and "Traceback" not in err
    assert ml_code == 1 and ml_err.startswith("error: perf managed-ledger against metastore://"), ml_err
    assert "Traceback" not in ml_err
