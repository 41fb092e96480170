"""The metastore server's metrics, with ZooKeeper's names (its Prometheus metrics provider).

Read at scrape time from the server's state, so serving costs one ``perf_counter`` pair and
two additions per request:

- gauges ``znode_count`` (keys, the root included), ``ephemerals_count``, ``global_sessions``
  (live sessions), ``num_alive_connections``, ``watch_count`` (watched paths summed over
  connections), ``avg_latency`` and ``max_latency`` (ms from a request's arrival to its
  answer, every request since start);
- summaries (``_count``, ``_sum`` in ms) ``readlatency`` and ``updatelatency``: requests that
  change nothing / that log a change (ZooKeeper's quorum requests: put, delete, session
  create and close); ``fsynctime``: the WAL's group-commit ``fdatasync`` (none with
  ``forceSync=false``); ``snapshottime``: writing a snapshot and starting its log
  (``_count``: snapshots written, the one at start included);
- ``minipulsar_metastore_request_latency_ms{type}``: a summary per MD_* request type
  (minipulsar's own: ZooKeeper has no per-operation series).

Latencies include the wait for durability: an answer leaves once every change before it is
on disk (:mod:`.durable`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily

from minipulsar.metrics import RegisteredCollector
from minipulsar.protocol.commands import MdDelete, MdPut, MdSessionClose, MdSessionCreate

if TYPE_CHECKING:
    from minipulsar.metadata.server import MetastoreServer

UPDATE_TYPES = frozenset(c.TYPE for c in (MdPut, MdDelete, MdSessionCreate, MdSessionClose))
"""Requests that log a change: ZooKeeper's ``updatelatency``; the rest are ``readlatency``."""


class RequestStats:
    """Count, total and maximum latency (ms) of answered requests, by MD_* type."""

    __slots__ = ("by_type", "max_ms")

    def __init__(self) -> None:
        self.by_type: dict[str, list[float]] = {}
        """type → [count, total ms] (the count a float only to share the list)."""
        self.max_ms = 0.0

    def answered(self, request_type: str, started: float) -> None:
        """A request of ``request_type`` that arrived at ``perf_counter()`` ``started`` is answered."""
        ms = (time.perf_counter() - started) * 1000
        totals = self.by_type.get(request_type)
        if totals is None:
            totals = self.by_type[request_type] = [0, 0.0]
        totals[0] += 1
        totals[1] += ms
        if ms > self.max_ms:
            self.max_ms = ms

    def totals(self, wanted: Callable[[str], bool]) -> tuple[int, float]:
        """Count and total ms of the request types ``wanted`` accepts."""
        count, total = 0, 0.0
        for request_type, (n, ms) in self.by_type.items():
            if wanted(request_type):
                count, total = count + int(n), total + ms
        return count, total


class MetastoreCollector(RegisteredCollector):
    """Exports :class:`MetastoreServer`'s state and :class:`RequestStats` at each scrape."""

    def __init__(self, server: MetastoreServer) -> None:
        self._server = server
        super().__init__()

    def collect(self) -> Iterator[Metric]:
        server, state = self._server, self._server.state
        if state is None:
            return
        sessions = state.tree.sessions
        connections = list(server.listener.connections)
        yield _gauge("znode_count", "Keys in the tree", len(state.tree))
        yield _gauge("ephemerals_count", "Ephemeral keys", sum(len(s.ephemerals) for s in sessions))
        yield _gauge("global_sessions", "Live sessions", len(sessions))
        yield _gauge("num_alive_connections", "Open client connections", len(connections))
        yield _gauge("watch_count", "Watched paths, summed over connections", sum(len(c.watches) for c in connections))
        yield from self._latencies(server.requests)
        writer = state.writer
        fsyncs = writer.groups if writer.sync else 0
        yield _summary("fsynctime", "WAL group-commit fdatasync time (ms)", fsyncs, writer.fsync_ms_total)
        yield _summary("snapshottime", "Snapshot write time (ms)", writer.snapshots, writer.snapshot_ms_total)

    @staticmethod
    def _latencies(requests: RequestStats) -> Iterator[Metric]:
        count, total = requests.totals(lambda _: True)
        yield _gauge("avg_latency", "Average request latency since start (ms)", total / count if count else 0.0)
        yield _gauge("max_latency", "Highest request latency since start (ms)", requests.max_ms)
        reads, updates = requests.totals(lambda t: t not in UPDATE_TYPES), requests.totals(UPDATE_TYPES.__contains__)
        yield _summary("readlatency", "Latency of requests that change nothing (ms)", *reads)
        yield _summary("updatelatency", "Latency of requests that log a change (ms)", *updates)
        by_type = SummaryMetricFamily(
            "minipulsar_metastore_request_latency_ms",
            "Latency of metastore requests by MD_* type (ms)",
            labels=("type",),
        )
        for request_type, (n, ms) in sorted(requests.by_type.items()):
            by_type.add_metric((request_type,), int(n), ms)
        yield by_type


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _summary(name: str, documentation: str, count: int, total: float) -> SummaryMetricFamily:
    return SummaryMetricFamily(name, documentation, count_value=count, sum_value=total)
