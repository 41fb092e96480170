"""Running a lab scenario's ``--quick`` profile inside a test, as CI's guard of its finding.

The scenario runs in the test's event loop with its work dir under the test's tmp dir (kept,
so the servers' logs are there to read); every ERROR a server process wrote fails the test,
as :mod:`tests.support.process` does for the suite's own processes.
"""

from __future__ import annotations

from pathlib import Path

from minipulsar.lab.catalog import scenarios
from minipulsar.lab.disk_choice import choose_disks
from minipulsar.lab.progress import SilentProgress
from minipulsar.lab.result import ScenarioResult
from minipulsar.lab.runner import run_scenario
from minipulsar.lab.scenario import QUICK
from tests.support.process import ERROR_LINE

GUARD_SEED = 7
"""The fixed seed the guards run with (the CLI's default too)."""


async def run_quick(name: str, tmp_path: Path, seed: int = GUARD_SEED) -> ScenarioResult:
    """Run scenario ``name``'s quick profile; its report goes to ``tmp_path/out/<name>``."""
    choice = choose_disks("auto", None, None)
    work = tmp_path / "work"
    work.mkdir()
    result = await run_scenario(
        scenarios()[name],
        out_dir=tmp_path / "out",
        profile=QUICK,
        seed=seed,
        disks=choice.provider,
        disk_label=choice.label,
        progress=SilentProgress(),
        work_dir=work,
        keep=True,
    )
    errors = [
        line
        for log in sorted(work.rglob("logs/*.log"))
        for line in log.read_text().splitlines()
        if ERROR_LINE.match(line)
    ]
    assert not errors, "server processes logged errors:\n" + "\n".join(errors[:20])
    for artefact in ("report.md", "result.json", *(f"{chart.name}.png" for chart in result.charts)):
        assert (tmp_path / "out" / name / artefact).is_file(), artefact
    return result


def describe(result: ScenarioResult) -> str:
    """The headlines, for an assertion message."""
    return "; ".join(
        f"{h.name}: {h.baseline:.4g} → {h.tuned:.4g} {h.unit} (gain {h.gain:.2f})" for h in result.headlines
    )
