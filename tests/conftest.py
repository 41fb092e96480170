"""Test-wide settings.

- Markers by directory: ``tests/unit`` (pure logic, no sockets), ``tests/component`` (servers
  in-process on 127.0.0.1), ``tests/cluster`` (real processes), ``tests/faults`` (real
  processes killed, paused, starved of disk or fed garbage).
- uvloop when ``MINIPULSAR_UVLOOP=1``.
- ``make test`` runs on pytest-xdist workers (``--dist loadgroup``: each test goes to whichever
  worker is free, but tests of one ``xdist_group`` go to one worker). The tests of a module that
  use a module-scoped fixture (a cluster for the module, its event loop) are put in one group
  named after the module: its fixture is set up once, and they run in order beside it, as in a
  run on one process.
- Bugs fail tests: a test during which a project logger (``minipulsar.*``) wrote an ERROR
  record — in the test process or in a server process the test started (its log file) —, or
  the event loop saw an exception nobody handled (asyncio's ``Task exception was
  never retrieved``, ``Exception in callback``), fails — unless it says it provokes that
  record on purpose: ``@pytest.mark.expect_error_log(r"regex", ...)`` allows the ERROR
  records whose message matches one of the patterns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable, Iterator

import pytest

from tests.support.process import new_child_error_records

pytest_plugins = ["pytester", "tests.support.fixtures"]

KINDS = ("unit", "component", "cluster", "faults")
PROJECT_LOGGERS = ("minipulsar", "asyncio")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = config.rootpath / "tests"
    for item in items:
        kind = item.path.relative_to(tests).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"{item.path}: a test lives in one of tests/{{{','.join(KINDS)}}}/")
        item.add_marker(getattr(pytest.mark, kind))
        if item.get_closest_marker("xdist_group") is None and _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.relative_to(config.rootpath).as_posix()))


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether a fixture the test requests (directly or through others) lives as long as its module."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's record of a function's fixture closure
    if info is None:
        return False
    return any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    if os.environ.get("MINIPULSAR_UVLOOP") == "1":
        import uvloop

        return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


class ErrorRecords(logging.Handler):
    """Collects the ERROR records of the project's loggers (and asyncio's), from any thread."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in PROJECT_LOGGERS:
            self.records.append(record)


@pytest.fixture(autouse=True)
def fail_on_error_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    earlier = [f"{who} (before this test began): {message}" for who, message in new_child_error_records()]
    handler = ErrorRecords()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
    allowed = [re.compile(p) for m in request.node.iter_markers("expect_error_log") for p in m.args]
    records = [_describe(r) for r in handler.records] + [
        f"{who}: {message}" for who, message in new_child_error_records()
    ]
    unexpected = [r for r in earlier + records if not any(p.search(r) for p in allowed)]
    if unexpected:
        report = "\n".join(unexpected)
        pytest.fail(
            f"ERROR logged during the test (a bug, or mark the test expect_error_log):\n{report}", pytrace=False
        )


def _describe(record: logging.LogRecord) -> str:
    text = f"{record.name}: {record.getMessage()}"
    if record.exc_info:
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    return text
