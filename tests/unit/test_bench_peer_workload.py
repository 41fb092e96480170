"""Goal: the peers' workload (bench/peers/workload.py) measures as ``perf produce`` does — the
warm-up's messages counted without their latencies, at most ``max_outstanding`` in flight,
everything in flight at the end waited for and counted, the consumer's count over the run.

Method: a fake peer on the event loop (no sockets) that acknowledges each message on the next
loop turn and delivers it to the receive counter; sub-second runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.peers.workload import Done, PeerWorkload, ReceiveCounter, run_workload

WORKLOAD = PeerWorkload(size_bytes=100, duration_s=0.2, warmup_s=0.1, max_outstanding=8, interval_s=0.1)


class FakePeer:
    """Acknowledges on the next loop turn; remembers the most messages ever in flight."""

    def __init__(self, receiver: ReceiveCounter, error: BaseException | None = None) -> None:
        self.receiver, self.error = receiver, error
        self.in_flight = self.most_in_flight = self.sent = 0

    def issue(self, done: Done) -> None:
        self.sent += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        asyncio.get_running_loop().call_soon(self._acknowledge, done)

    def _acknowledge(self, done: Done) -> None:
        self.in_flight -= 1
        self.receiver.add(1)
        done(self.error)


async def run_against_fake_peer(peer_error: BaseException | None = None) -> tuple[FakePeer, dict[str, Any], list[str]]:
    receiver, lines = ReceiveCounter(), []
    peer = FakePeer(receiver, peer_error)
    figures = await asyncio.wait_for(run_workload(peer.issue, receiver, WORKLOAD, "fake", lines.append), 10)
    return peer, figures, lines


async def test_every_acknowledged_message_counts_and_only_the_warm_up_has_no_latency() -> None:
    peer, figures, lines = await run_against_fake_peer()
    assert figures["messages"] == peer.sent and figures["bytes"] == 100 * peer.sent and figures["failures"] == 0
    assert 0 < figures["latency"]["count"] < figures["messages"], "the warm-up's latencies are left out"
    assert peer.most_in_flight <= WORKLOAD.max_outstanding and peer.in_flight == 0
    assert 0.3 <= figures["duration_s"] < 5 and figures["msg_per_s"] > 0
    assert 0 < figures["received"] <= peer.sent and figures["receive_msg_per_s"] > 0
    assert any(line.startswith("Throughput produced: ") for line in lines), "perf's periodic lines"
    assert any(line.startswith("Aggregated latency stats --- ") for line in lines)


async def test_refused_messages_are_failures_not_messages() -> None:
    peer, figures, _ = await run_against_fake_peer(RuntimeError("refused"))
    assert (figures["messages"], figures["failures"]) == (0, peer.sent)
    assert figures["latency"]["count"] == 0
