"""The suite's one door to the load generators: produce (through a broker) and managed-ledger
(straight to the bookies), returning plain figures.

Scenarios describe a run as a :class:`ProduceSpec` / :class:`LedgerSpec` and get back a
figures dict with pulsar-perf's names (``msg_per_s``, ``mb_per_s``, ``latency`` with
``mean_ms`` … ``max_ms``) and ``engine``, which says what produced them:

- ``minipulsar perf`` — the library behind ``minipulsar perf produce|managed-ledger``
  (``minipulsar.cli.perf.run_produce`` / ``run_managed_ledger``), the default wherever it is
  installed. Its warm-up is pulsar-perf's: the first ``warmup_s`` seconds are sent and
  counted in the throughput, only their latencies are left out; so the suite runs it for
  ``warmup_s + duration_s``.
- ``suite`` — :mod:`bench.suite.fallback_engine`, the suite's own loop (the same ``send_async``
  + HdrHistogram measurement; the warm-up is neither counted nor timed). Used for runs with a
  concurrent consumer (the peers table: every row of it, minipulsar's and the peers', then
  runs the same loop), when ``minipulsar.cli.perf`` is absent, or with ``--engine suite``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from bench.suite import fallback_engine

Figures = dict[str, Any]
Emit = Callable[[str], None]
ENGINES = ("auto", "perf", "suite")
_engine = "auto"


@dataclass(frozen=True, slots=True)
class ProduceSpec:
    """One produce run: pulsar-perf ``produce`` flags, in the suite's words."""

    topic: str
    """The topic; with ``num_topics`` > 1, ``<topic>-0`` … ``<topic>-(N-1)`` (as ``-t N``)."""
    num_topics: int = 1
    size_bytes: int = 1024
    rate: float = 0.0
    """Messages/s over all topics (``-r``); 0: as fast as the producers take them."""
    duration_s: float = 5.0
    warmup_s: float = 1.0
    batching: bool = True
    batch_delay_ms: float = 1.0
    """pulsar-perf's ``-b`` default (1 ms)."""
    batch_max_messages: int = 1000
    batch_max_bytes: int = 128 * 1024
    max_outstanding: int = 1000
    """Per producer (``-o``): messages sent and not yet acknowledged."""
    consume: bool = False
    """One consumer per topic, subscribed before the first send, receiving during the run."""
    interval_s: float = 5.0
    """Seconds between progress lines."""

    def topics(self) -> list[str]:
        if self.num_topics <= 1:
            return [self.topic]
        return [f"{self.topic}-{i}" for i in range(self.num_topics)]


@dataclass(frozen=True, slots=True)
class LedgerSpec:
    """One managed-ledger run: ``num_ledgers`` ledgers written round robin, no broker."""

    num_ledgers: int = 1
    size_bytes: int = 1024
    rate: float = 0.0
    duration_s: float = 5.0
    warmup_s: float = 1.0
    ensemble: int = 2
    write_quorum: int = 2
    ack_quorum: int = 2
    max_outstanding: int = 1000
    interval_s: float = 5.0


def set_engine(name: str) -> None:
    """``auto`` (minipulsar perf where installed), ``perf`` (it, or fail) or ``suite``."""
    global _engine  # noqa: PLW0603 -- chosen once per bench run, from its flags
    if name not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}")
    if name == "perf" and not perf_available():
        raise RuntimeError("--engine perf: minipulsar.cli.perf is not installed")
    _engine = name


def perf_available() -> bool:
    try:
        import minipulsar.cli.perf  # noqa: F401
    except ImportError:
        return False
    return True


def engine_name(consume: bool = False) -> str:
    """The engine a run would use: ``minipulsar perf`` or ``suite``."""
    if consume or _engine == "suite" or (_engine == "auto" and not perf_available()):
        return "suite"
    return "minipulsar perf"


def describe_engines() -> str:
    """For the report: which engine runs what."""
    if engine_name() == "suite":
        return "the suite's own loop (bench/suite/fallback_engine.py) for every run"
    return (
        "`minipulsar perf` (minipulsar.cli.perf run_produce / run_managed_ledger) for produce and managed-ledger "
        "runs; the suite's own loop for runs with a concurrent consumer (the peers table)"
    )


async def produce(service_url: str, spec: ProduceSpec, emit: Emit) -> Figures:
    """Run ``spec`` against the broker at ``service_url``; progress lines go to ``emit``."""
    started = time.monotonic()
    engine = engine_name(spec.consume)
    if engine == "suite":
        figures = await fallback_engine.produce(service_url, spec, emit)
    else:
        figures = await _perf_produce(service_url, spec, emit)
    return figures | {"engine": engine, "wall_s": time.monotonic() - started, "options": asdict(spec)}


async def managed_ledger(metadata_url: str, spec: LedgerSpec, emit: Emit) -> Figures:
    """Run ``spec`` straight against the bookies registered in ``metadata_url``."""
    started = time.monotonic()
    engine = engine_name()
    if engine == "suite":
        figures = await fallback_engine.managed_ledger(metadata_url, spec, emit)
    else:
        figures = await _perf_managed_ledger(metadata_url, spec, emit)
    return figures | {"engine": engine, "wall_s": time.monotonic() - started, "options": asdict(spec)}


# -- minipulsar perf ----------------------------------------------------------------------------


async def _perf_produce(service_url: str, spec: ProduceSpec, emit: Emit) -> Figures:
    from minipulsar.cli.perf import ProduceOptions, run_produce

    options = ProduceOptions(
        topics=[spec.topic],
        num_topics=spec.num_topics if spec.num_topics > 1 else None,
        service_url=service_url,
        rate_per_s=spec.rate,
        size_bytes=spec.size_bytes,
        duration_s=spec.warmup_s + spec.duration_s,
        warmup_s=spec.warmup_s,
        batching=spec.batching,
        batch_time_window_ms=spec.batch_delay_ms,
        batch_max_messages=spec.batch_max_messages,
        batch_max_bytes=max(spec.batch_max_bytes, spec.size_bytes),
        max_outstanding=spec.max_outstanding,
        stats_interval_s=spec.interval_s,
        operation_timeout_s=60.0,
    )
    set_up = time.monotonic()
    result = await run_produce(options, emit=emit)
    figures = _from_perf(result)
    # what run_produce spent before its clock started: creating the producers
    figures["setup_s"] = max(0.0, time.monotonic() - set_up - result.duration_s)
    figures["topics"] = spec.num_topics
    return figures


async def _perf_managed_ledger(metadata_url: str, spec: LedgerSpec, emit: Emit) -> Figures:
    from minipulsar.cli.perf import ManagedLedgerOptions, run_managed_ledger

    options = ManagedLedgerOptions(
        metadata_url=metadata_url,
        rate_per_s=spec.rate,
        size_bytes=spec.size_bytes,
        num_ledgers=spec.num_ledgers,
        ensemble_size=spec.ensemble,
        write_quorum=spec.write_quorum,
        ack_quorum=spec.ack_quorum,
        max_outstanding=spec.max_outstanding,
        duration_s=spec.warmup_s + spec.duration_s,
        warmup_s=spec.warmup_s,
        stats_interval_s=spec.interval_s,
    )
    figures = _from_perf(await run_managed_ledger(options, emit=emit))
    figures["quorum"] = f"{spec.ensemble}/{spec.write_quorum}/{spec.ack_quorum}"
    return figures


def _from_perf(result: Any) -> Figures:
    """A PerfResult as the suite's figures (the same key names; ``intervals`` kept)."""
    data = result.to_json()
    latency = data.pop("latency")
    data.pop("options", None)  # the suite records its own spec
    data["latency"] = {
        key: latency.get(key) for key in ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms")
    }
    data["latency"]["count"] = latency.get("count")
    data["failures"] = data.get("failures", 0)
    return data
