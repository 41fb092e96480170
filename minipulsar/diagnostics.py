"""Stall diagnostics: a bounded in-memory ring of the events that can stop a pipeline, and
the monitors that feed it — Python's cyclic GC in this process and the event loop's lag.

Off by default: until :func:`install` runs, :func:`record` and :func:`span` cost one global
lookup and do nothing. A server installs it when ``minipulsarDiagnosticsFile`` names a file
(:func:`minipulsar.cli.common.run_server`); the bench also installs it in its own process,
where perf's producer runs. What is recorded:

- ``gc``: every collection of generation 1 or 2, and one of generation 0 that took at least
  :data:`GC_YOUNG_MIN_MS` (``generation``, ``collected``; ``duration_ms``);
- ``loop_lag``: a :data:`LAG_TICK_S` timer that fired at least :data:`LAG_MIN_MS` late
  (``duration_ms`` = the lateness): the loop was held by a callback, the GIL or the CPU;
- whatever the code calls :func:`record` / :func:`span` for: the bookie's checkpoints and
  their parts (entry-log write + fsync, index commit, lastMark), entry-log and journal rolls,
  the broker's ledger rollovers, metadata writes.

An event is ``(t, kind, duration_ms, fields)``: ``t`` is ``time.monotonic()`` at its *start*
(CLOCK_MONOTONIC is one clock for every process of the host, so the events of all processes
and perf's latency samples line up without any offset), ``duration_ms`` None for an instant.
The ring keeps the newest :data:`RING_EVENTS` (older ones are dropped and counted). Threads
may record (``deque.append`` is atomic).

The server's monitor task appends the new events to the JSONL file once a second (and at
stop), one ``os.write`` of whole lines on an ``O_APPEND`` descriptor, so several processes may
share one file; each line carries ``role`` and ``pid``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RING_EVENTS = 20_000
"""Events kept in memory (about a minute of a busy process's events)."""
LAG_TICK_S = 0.010
"""The loop-lag monitor's timer."""
LAG_MIN_MS = 2.0
"""Lateness below this is not an event (a timer is normally ~0.1 ms late)."""
GC_YOUNG_MIN_MS = 1.0
"""A generation-0 collection shorter than this is not an event (there are hundreds a second)."""
WRITE_EVERY_S = 1.0

Event = tuple[float, str, float | None, dict[str, Any]]


class EventRing:
    """The newest ``maxlen`` events. Read either by :meth:`between` (the bench process: a
    history) or drained by :meth:`take_new` (a server's file sink), not both."""

    def __init__(self, maxlen: int = RING_EVENTS) -> None:
        self.events: collections.deque[Event] = collections.deque(maxlen=maxlen)
        self.recorded = 0
        """Events recorded so far (dropped ones included)."""

    def add(self, t: float, kind: str, duration_ms: float | None, fields: dict[str, Any]) -> None:
        self.events.append((t, kind, duration_ms, fields))
        self.recorded += 1

    def take_new(self) -> list[Event]:
        """Remove and return the events in the ring, oldest first (threads may go on adding)."""
        taken, events = [], self.events
        with contextlib.suppress(IndexError):
            while True:
                taken.append(events.popleft())
        return taken

    def between(self, start: float, end: float) -> list[Event]:
        """The events that started within [start, end], oldest first."""
        return [event for event in list(self.events) if start <= event[0] <= end]


class _State:
    ring: EventRing | None = None
    gc_watch: _GcWatch | None = None


_STATE = _State()


def ring() -> EventRing | None:
    """The process's ring (None: diagnostics off)."""
    return _STATE.ring


def record(kind: str, duration_ms: float | None = None, t: float | None = None, **fields: Any) -> None:
    """One event (``t``: its start, default now). No-op while diagnostics are off."""
    events = _STATE.ring
    if events is not None:
        events.add(time.monotonic() if t is None else t, kind, duration_ms, fields)


@contextlib.contextmanager
def span(kind: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """Record ``kind`` with the duration of the ``with`` body; the body may add fields to the
    dict it gets. Recorded also when the body raises (with ``failed``)."""
    if _STATE.ring is None:
        yield fields
        return
    started = time.monotonic()
    try:
        yield fields
    except BaseException:
        fields["failed"] = True
        raise
    finally:
        record(kind, (time.monotonic() - started) * 1000, t=started, **fields)


class _GcWatch:
    """``gc.callbacks`` entry: times each collection (the callbacks run on the collecting thread,
    with the GIL held, so one start time at a time suffices)."""

    def __init__(self) -> None:
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.monotonic()
            return
        now = time.monotonic()
        duration_ms = (now - self._started) * 1000
        generation = info.get("generation", 0)
        if generation > 0 or duration_ms >= GC_YOUNG_MIN_MS:
            record("gc", duration_ms, t=self._started, generation=generation, collected=info.get("collected", 0))


def install(maxlen: int = RING_EVENTS) -> EventRing:
    """Turn diagnostics on in this process (idempotent): the ring and the GC watch."""
    if _STATE.ring is None:
        _STATE.ring = EventRing(maxlen)
    if _STATE.gc_watch is None:
        _STATE.gc_watch = _GcWatch()
        gc.callbacks.append(_STATE.gc_watch)
    return _STATE.ring


def uninstall() -> None:
    """Diagnostics off (tests; a process that installed them keeps them until it exits)."""
    if _STATE.gc_watch is not None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(_STATE.gc_watch)
    _STATE.ring = _STATE.gc_watch = None


async def watch_loop_lag(tick_s: float = LAG_TICK_S, min_ms: float = LAG_MIN_MS) -> None:
    """Forever: sleep ``tick_s``, record a ``loop_lag`` event when the wake-up was late."""
    monotonic = time.monotonic
    while True:
        due = monotonic() + tick_s
        await asyncio.sleep(tick_s)
        late_ms = (monotonic() - due) * 1000
        if late_ms >= min_ms:
            record("loop_lag", late_ms, t=due)


def event_json(event: Event, **context: Any) -> dict[str, Any]:
    t, kind, duration_ms, fields = event
    data: dict[str, Any] = {"t": t, "kind": kind, **context}
    if duration_ms is not None:
        data["duration_ms"] = round(duration_ms, 3)
    if fields:
        data.update(fields)
    return data


class FileSink:
    """Appends a ring's new events to a JSONL file (shared by processes: O_APPEND, one write)."""

    def __init__(self, path: Path, events: EventRing, role: str) -> None:
        self.path = path
        self._ring = events
        self._context = {"role": role, "pid": os.getpid()}

    def write_new(self) -> int:
        events = self._ring.take_new()
        if not events:
            return 0
        text = "".join(json.dumps(event_json(e, **self._context), separators=(",", ":")) + "\n" for e in events)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        return len(events)


async def run_monitor(path: Path, role: str) -> None:
    """A server's diagnostics until cancelled: install, watch the loop lag, write the events to
    ``path`` every :data:`WRITE_EVERY_S` (and once more when cancelled)."""
    events = install()
    sink = FileSink(path, events, role)
    record("start", role=role)
    lag = asyncio.get_running_loop().create_task(watch_loop_lag())
    try:
        while True:
            await asyncio.sleep(WRITE_EVERY_S)
            sink.write_new()
    finally:
        lag.cancel()
        with contextlib.suppress(OSError):
            sink.write_new()


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events of a diagnostics file, oldest first (a torn last line is skipped)."""
    events = []
    try:
        with open(path) as file:
            for line in file:
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line))
    except FileNotFoundError:
        return []
    events.sort(key=lambda e: e.get("t", 0.0))
    return events
