"""``minipulsar standalone --brokers 3``: three brokers that share the topics through bundles.

Goal: the launcher starts three brokers on their own ports, all registered; a topic produced
through one broker is consumed through another (lookup finds the owner); SIGTERM stops
everything with exit code 0.
Method: the real launcher with every port 0; the admin CLI's client for the REST calls.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from minipulsar import Client, InitialPosition
from minipulsar.cli.admin import AdminClient
from tests.support.process import ServerProcess

ANY_PORTS = [
    "--broker-port",
    "0",
    "--web-port",
    "0",
    "--metastore-port",
    "0",
    "--metastore-http-port",
    "0",
    "--bookie-port",
    "0",
    "--bookie-http-port",
    "0",
]


async def test_three_brokers_serve_one_cluster_and_stop_cleanly(tmp_path: Path) -> None:
    launcher = ServerProcess(
        "standalone", ["--data-dir", str(tmp_path / "data"), "--brokers", "3", *ANY_PORTS], tmp_path / "launcher.log"
    )
    await asyncio.to_thread(launcher.start, 90)
    try:
        admin = AdminClient(f"http://{launcher.host}:{launcher.http_port}", 30)
        brokers = await asyncio.to_thread(admin.request, "GET", "/admin/v2/brokers/standalone")
        assert len(brokers) == 3 and f"{launcher.host}:{launcher.http_port}" in brokers
        logs = sorted(p.name for p in (tmp_path / "data" / "logs").glob("broker*.log"))
        assert logs == ["broker-0.log", "broker-1.log", "broker-2.log"]
        other = next(b for b in brokers if b != f"{launcher.host}:{launcher.http_port}")
        report = await asyncio.to_thread(
            AdminClient(f"http://{other}", 30).request, "GET", "/admin/v2/broker-stats/load-report"
        )
        other_url = report["pulsarServiceUrl"]
        assert other_url != f"pulsar://{launcher.address}"
        async with Client(f"pulsar://{launcher.address}") as producing, Client(other_url) as consuming:
            consumer = await consuming.subscribe("spread", "sub", initial_position=InitialPosition.Earliest)
            producer = await producing.create_producer("spread")
            for i in range(10):
                await producer.send(f"hello-{i}".encode())
            got = [(await consumer.receive(timeout_millis=10_000)).data() for _ in range(10)]
            assert got == [f"hello-{i}".encode() for i in range(10)]
    finally:
        code = await asyncio.to_thread(launcher.stop, 60)
    assert code == 0, launcher.log_tail()
    assert "broker-2 stopped" in launcher.log_path.read_text()
