"""AutoRecovery's processes and operator verbs: ``minipulsar autorecovery`` as its own process,
the bookie's ``/api/v1/autorecovery`` REST endpoints and ``minipulsar admin bookies``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from minipulsar.metadata import open_metadata_store
from tests.support.cli import run_cli
from tests.support.cluster import make_cluster
from tests.support.process import ServerProcess, wait_for
from tests.support.web import http_request, metrics_text, web_url


async def test_autorecovery_process_is_elected_exports_metrics_and_stops_cleanly(tmp_path: Path) -> None:
    """Goal: ``minipulsar autorecovery`` prints READY, wins the election when it is the only
    voter, exports the auditor's metrics, and on SIGTERM withdraws its vote and exits 0.
    Method: 2 bookies with autoRecoveryDaemonEnabled=false, one autorecovery process."""
    async with make_cluster(
        tmp_path, bookies=2, brokers=0, bookie_settings={"autoRecoveryDaemonEnabled": False}
    ) as cluster:
        process = ServerProcess(
            "autorecovery",
            ["--metadata-url", cluster.metadata_url, "--http-port", "0", "--set", "zkTimeout=2000"],
            tmp_path / "logs" / "autorecovery.log",
        )
        await asyncio.to_thread(process.start)
        try:
            my_id = f"autorecovery-{process.host}:{process.http_port}"

            def auditor() -> str:
                return run_cli("admin", "bookies", "--metadata-url", cluster.metadata_url, "who-is-auditor").stdout

            await wait_for(lambda: my_id in auditor(), timeout_s=20, interval_s=0.5, message="not elected")
            text = await asyncio.to_thread(metrics_text, process)
            assert "auditor_NUM_UNDER_REPLICATED_LEDGERS" in text
            assert "replication_worker_NUM_ENTRIES_WRITTEN" in text
        finally:
            code = await asyncio.to_thread(process.stop)
        assert code == 0
        assert "no auditor" in auditor()


async def test_rest_and_cli_verbs_share_the_metadata_state(tmp_path: Path) -> None:
    """Goal: the bookie's REST endpoints and ``admin bookies`` read and change the same state:
    the disable flag, lostBookieRecoveryDelay, the under-replicated list, the auditor.
    Method: 2 bookies with AutoRecovery on; flip each setting through one, read it through the other."""
    async with make_cluster(tmp_path, bookies=2, brokers=0) as cluster:
        base = f"{web_url(cluster.bookies[0])}/api/v1/autorecovery"
        url = cluster.metadata_url

        def cli(*args: str) -> str:
            result = run_cli("admin", "bookies", "--metadata-url", url, *args)
            assert result.returncode == 0, result.stderr
            return result.stdout

        listed = json.loads(await asyncio.to_thread(cli, "list"))
        assert sorted(listed["writable"]) == sorted(b.address for b in cluster.bookies)
        assert await asyncio.to_thread(http_request, "GET", f"{base}/status") == (200, {"enabled": True})
        assert json.loads(await asyncio.to_thread(cli, "autorecovery", "disable")) == {"enabled": False}
        assert await asyncio.to_thread(http_request, "GET", f"{base}/status") == (200, {"enabled": False})
        assert await asyncio.to_thread(http_request, "PUT", f"{base}/status?enabled=true") == (200, {"enabled": True})
        assert json.loads(await asyncio.to_thread(cli, "autorecovery", "status")) == {"enabled": True}
        assert (await asyncio.to_thread(cli, "lost-bookie-recovery-delay", "7")).strip() == "7"
        status, body = await asyncio.to_thread(http_request, "GET", f"{base}/lost_bookie_recovery_delay")
        assert (status, body) == (200, {"lostBookieRecoveryDelay": 7})
        status, _ = await asyncio.to_thread(
            http_request, "PUT", f"{base}/lost_bookie_recovery_delay", {"delay_seconds": 0}
        )
        assert status == 200
        assert (await asyncio.to_thread(cli, "lost-bookie-recovery-delay")).strip() == "0"
        assert await asyncio.to_thread(http_request, "GET", f"{base}/list_under_replicated_ledger") == (200, [])
        assert (await asyncio.to_thread(cli, "list-underreplicated")).strip() == ""
        status, body = await asyncio.to_thread(http_request, "GET", f"{base}/who_is_auditor")
        assert status == 200 and body["Auditor"] in {b.address for b in cluster.bookies}
        status, _ = await asyncio.to_thread(http_request, "PUT", f"{base}/bookie", {"bookie_src": "not-a-list"})
        assert status == 400
        store = await open_metadata_store(url)
        try:
            assert await store.exists("/ledgers/underreplication/lostBookieRecoveryDelay")
        finally:
            await store.close()
