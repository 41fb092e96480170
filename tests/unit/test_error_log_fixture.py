"""Goal: a test fails when a project logger writes ERROR it did not expect, or the loop saw an
exception nobody handled; a test that provokes one on purpose says so with a marker.

Method: run a small test file through pytest in-process (pytester) with the suite's conftest.
Its ERROR records reach this test's loggers too, hence this test's own marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.process import ServerProcess

CONFTEST = (Path(__file__).resolve().parents[1] / "conftest.py").read_text()
INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
markers =
    expect_error_log(*patterns): the test provokes these ERROR records
"""
EXAMPLES = """
import asyncio
import logging

import pytest

from tests.support.process import ServerProcess

log = logging.getLogger("minipulsar.broker.example")


def test_logs_an_error():
    log.error("the cursor ledger vanished")


@pytest.mark.expect_error_log(r"cursor ledger vanished")
def test_provokes_it_on_purpose():
    log.error("the cursor ledger vanished")


@pytest.mark.expect_error_log(r"something else")
def test_expects_another_error():
    log.error("the cursor ledger vanished")


def test_a_warning_is_no_failure():
    log.warning("a bookie is slow")


def test_other_libraries_errors_are_theirs():
    logging.getLogger("aiohttp.server").error("not ours")


async def test_an_exception_in_a_callback():
    done = asyncio.Event()

    def callback():
        done.set()
        raise ValueError("a bug in a callback")

    asyncio.get_running_loop().call_soon(callback)
    await done.wait()
"""


@pytest.fixture
def outcomes(pytester: pytest.Pytester) -> dict[str, bool]:
    """Each example's name → whether it failed (in its call or its teardown)."""
    pytester.makeconftest(CONFTEST.replace('"pytester", "tests.support.fixtures"', ""))
    pytester.makeini(INI)
    (pytester.mkdir("tests") / "unit").mkdir()
    (pytester.path / "tests" / "unit" / "test_examples.py").write_text(EXAMPLES)
    reports = pytester.inline_run("-p", "no:cacheprovider").getreports("pytest_runtest_logreport")
    failed: dict[str, bool] = {}
    for report in reports:
        name = report.nodeid.rpartition("::")[2]
        failed[name] = failed.get(name, False) or report.failed
    return failed


pytestmark = pytest.mark.expect_error_log(r"cursor ledger vanished", r"Exception in callback", r"not ours")


def test_an_unexpected_error_record_fails_the_test(outcomes: dict[str, bool]) -> None:
    assert outcomes["test_logs_an_error"]
    assert outcomes["test_expects_another_error"]


def test_an_expected_error_record_a_warning_and_others_errors_pass(outcomes: dict[str, bool]) -> None:
    assert not outcomes["test_provokes_it_on_purpose"]
    assert not outcomes["test_a_warning_is_no_failure"]
    assert not outcomes["test_other_libraries_errors_are_theirs"]


def test_an_exception_the_event_loop_saw_fails_the_test(outcomes: dict[str, bool]) -> None:
    assert outcomes["test_an_exception_in_a_callback"]


def test_a_server_process_log_yields_its_error_lines_once_with_their_tracebacks(tmp_path: Path) -> None:
    """The child side: a server's log file is read for ERROR/CRITICAL lines of our loggers,
    each with the traceback under it, and each line only once."""
    log = tmp_path / "bookie.log"
    log.write_text(
        "2026-12-01 20:31:33,913 INFO  minipulsar.bookie.journal: started\n"
        "2026-12-01 20:31:34,001 ERROR minipulsar.bookie.storage.gc: garbage collection failed\n"
        "Traceback (most recent call last):\n"
        '  File "gc.py", line 1, in run\n'
        "ValueError: a bug\n"
        "2026-12-01 20:31:34,002 ERROR aiohttp.server: not ours\n"
        "2026-12-01 20:31:34,003 WARNING minipulsar.bookie: slow\n"
    )
    process = ServerProcess("bookie", [], log)
    [(logger, message)] = process.new_error_records()
    assert logger == "minipulsar.bookie.storage.gc"
    assert message.startswith("garbage collection failed\nTraceback") and message.endswith("ValueError: a bug")
    with log.open("a") as more:
        more.write("2026-12-01 20:31:35,000 CRITICAL minipulsar.metadata.wal: metastore WAL write failed\n")
        more.write("2026-12-01 20:31:35,001 ERROR minipulsar.bookie: half a li")
    assert process.new_error_records() == [("minipulsar.metadata.wal", "metastore WAL write failed")]
