"""Goal: a BookieClient's connect attempt that fails after every request waiting on it was
cancelled is retrieved, not reported by asyncio as ``Task exception was never retrieved``
(a bookie's replication worker logged that at ERROR when its reads timed out first).

Method: a port that swallows connects; a request starts the connect and is cancelled while the
shielded attempt runs on; the attempt times out. The suite's conftest fails the test on the
asyncio ERROR record; the test also collects garbage so the record is written now."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from minipulsar.bookkeeper.bookie_client import BookieClient
from tests.support.net import black_hole
from tests.support.process import wait_for


async def test_a_failed_connect_nobody_waits_for_is_not_an_unretrieved_task_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = BookieClient(timeout_s=0.3, max_frame_size=1 << 20)
    with black_hole() as (host, port):
        bookie = f"{host}:{port}"
        try:
            request = client.bookie_info(bookie)
            await wait_for(lambda: bookie in client._connecting, 5, 0.001, "the connect never started")
            attempt = client._connecting[bookie]
            request.cancel()
            with caplog.at_level(logging.WARNING):
                await asyncio.wait([attempt], timeout=5)
                assert attempt.done(), "the connect to a silent port never ended"
                del attempt  # unreferenced: asyncio reports an unretrieved exception now
                gc.collect()
            assert bookie not in client._connecting
            assert [r for r in caplog.records if "cannot connect to bookie" in r.getMessage()], "the failure was logged"
            assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
        finally:
            await client.close()
