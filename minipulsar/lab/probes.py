"""Reading a running cluster: Prometheus text from ``/metrics``, JSON from the admin API.

:class:`Samples` is one scrape, parsed with prometheus-client's own parser; a figure is asked
for by name and a subset of labels. Scrapes go through one shared aiohttp session with a
short deadline: a process that does not answer yields ``None``, and the scenario's chart has
a gap there rather than the run failing (a dying process is the scenario's to notice).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from minipulsar.lab.result import Series

SCRAPE_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class Samples:
    """One scrape: ``(sample name, sorted label pairs) → value``."""

    values: dict[tuple[str, tuple[tuple[str, str], ...]], float]

    @classmethod
    def parse(cls, text: str) -> Samples:
        values = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
        return cls(values)

    def matching(self, name: str, **labels: str) -> Iterable[tuple[dict[str, str], float]]:
        for (sample_name, pairs), value in self.values.items():
            if sample_name != name:
                continue
            label_map = dict(pairs)
            if all(label_map.get(key) == wanted for key, wanted in labels.items()):
                yield label_map, value

    def sum(self, name: str, **labels: str) -> float:
        """The sum over every series of ``name`` whose labels include ``labels`` (0 when none)."""
        return sum(value for _, value in self.matching(name, **labels))

    def get(self, name: str, **labels: str) -> float | None:
        """The one series' value (None when there is none)."""
        return next((value for _, value in self.matching(name, **labels)), None)

    def quantile(self, name: str, fraction: float, since: Samples | None = None, **labels: str) -> float | None:
        """The ``fraction`` quantile of histogram ``name`` (its ``_bucket`` series summed over
        label sets that include ``labels``), over the observations made since ``since``; the
        upper bound of the bucket it falls in (None: no observations)."""
        buckets: dict[float, float] = {}
        for label_map, value in self.matching(f"{name}_bucket", **labels):
            bound = float(label_map["le"])
            buckets[bound] = buckets.get(bound, 0.0) + value
        if since is not None:
            for label_map, value in since.matching(f"{name}_bucket", **labels):
                bound = float(label_map["le"])
                buckets[bound] = buckets.get(bound, 0.0) - value
        ordered = sorted(buckets.items())
        if not ordered or ordered[-1][1] <= 0:
            return None
        total = ordered[-1][1]
        finite = [bound for bound, _ in ordered if bound != float("inf")]
        for bound, cumulative in ordered:
            if cumulative >= fraction * total:
                return bound if bound != float("inf") else (finite[-1] if finite else None)
        return None


class Http:
    """The scenario's HTTP client (one session; closed with the context)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Http:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def metrics(self, base_url: str) -> Samples | None:
        text = await self._text(f"{base_url}/metrics")
        return None if text is None else Samples.parse(text)

    async def json(self, url: str) -> Any | None:
        text = await self._text(url)
        return None if text is None else json.loads(text)

    async def put(self, url: str, body: Any = None) -> int:
        assert self._session is not None
        async with self._session.put(url, json=body) as response:
            await response.read()
            return response.status

    async def post(self, url: str, body: Any = None) -> int:
        assert self._session is not None
        async with self._session.post(url, json=body) as response:
            await response.read()
            return response.status

    async def _text(self, url: str) -> str | None:
        assert self._session is not None
        try:
            async with self._session.get(url) as response:
                if response.status != 200:
                    return None
                return await response.text()
        except (aiohttp.ClientError, TimeoutError):
            return None


class Recorder:
    """Calls ``sample(t)`` every ``interval_s`` while running; ``t`` is seconds since start.

    The sample function adds points to the scenario's :class:`Series` itself (it knows which
    figures it reads). Sampling stops with :meth:`stop`, or when the context exits.
    """

    def __init__(self, interval_s: float, sample: Callable[[float], Awaitable[None]]) -> None:
        self.interval_s = interval_s
        self._sample = sample
        self._task: asyncio.Task[None] | None = None
        self.started_at = 0.0

    async def __aenter__(self) -> Recorder:
        loop = asyncio.get_running_loop()
        self.started_at = loop.time()
        self._task = asyncio.create_task(self._run(), name="lab-recorder")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def elapsed(self) -> float:
        return asyncio.get_running_loop().time() - self.started_at

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        tick = 0
        while True:
            tick += 1
            await self._sample(self.elapsed())
            await asyncio.sleep(max(0.0, self.started_at + tick * self.interval_s - loop.time()))


def rate_series(series: Series) -> Series:
    """Per-second rate of a cumulative series (counter), at the later point of each pair."""
    rates = Series(series.label, series.variant)
    for (t0, v0), (t1, v1) in zip(series.points, series.points[1:]):
        if t1 > t0 and v1 >= v0:
            rates.add(t1, (v1 - v0) / (t1 - t0))
    return rates
