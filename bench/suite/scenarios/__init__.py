"""The named scenarios, in the order a full run takes them. Each module has ``NAME``,
``TITLE``, ``WHAT`` (one sentence for the report) and ``async def run(ctx) -> dict`` that
returns the scenario's figures (``rows`` and anything else it measured); the runner adds the
run's metadata and writes ``<scenario>.json``."""

from __future__ import annotations

from types import ModuleType

from bench.suite.scenarios import consume, disks, e2e_vs_bookie, latency, peers, size, topics

SCENARIOS: dict[str, ModuleType] = {m.NAME: m for m in (size, latency, topics, disks, e2e_vs_bookie, consume, peers)}
DEFAULT = ("size", "latency", "topics", "disks", "e2e-vs-bookie", "consume")
"""What ``python -m bench`` (and ``make bench``) runs; ``peers`` is ``make bench-peers``."""
