"""Runs one scenario: a work dir, the disks, the scenario's variants, then the report.

Invariants: the work dir (process data, logs, emulated disks' backing files) is removed
after the run unless ``keep``; the output dir only ever holds ``report.md``, ``result.json``
and the charts; a failed scenario writes no report and its processes' logs stay in the
kept work dir (the error names it).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

from minipulsar.lab.disk_api import DiskProvider
from minipulsar.lab.progress import Progress
from minipulsar.lab.report import write_report
from minipulsar.lab.result import BASELINE, TUNED, ScenarioResult
from minipulsar.lab.scenario import LabContext, Profile, Scenario

log = logging.getLogger(__name__)


class ScenarioFailed(Exception):
    """The scenario could not run to the end; the message says why and where its logs are."""


async def run_scenario(
    scenario: Scenario,
    *,
    out_dir: Path,
    profile: Profile,
    seed: int,
    disks: DiskProvider,
    disk_label: str,
    progress: Progress,
    work_dir: Path | None = None,
    keep: bool = False,
) -> ScenarioResult:
    """Run ``scenario`` and write its report into ``out_dir/<name>/``."""
    work = Path(tempfile.mkdtemp(prefix=f"minipulsar-lab-{scenario.name}-", dir=work_dir))
    progress.scenario = scenario.name
    started_wall, started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), time.monotonic()
    context = LabContext(work, profile, seed, disks, progress)
    failed = True
    try:
        measured = await scenario.run(context)
        failed = False
    except Exception as error:
        raise ScenarioFailed(f"{scenario.name} failed: {error} (its processes' logs are under {work})") from error
    finally:
        if not keep and not failed:
            shutil.rmtree(work, ignore_errors=True)
    result = ScenarioResult(
        scenario=scenario.name,
        title=scenario.title,
        source=scenario.source,
        finding=scenario.finding,
        disk=disk_label,
        profile=profile.name,
        seed=seed,
        variants={BASELINE: scenario.baseline, TUNED: scenario.tuned},
        guard=scenario.guard,
        headlines=measured.headlines,
        charts=measured.charts,
        notes=measured.notes,
        started_at=started_wall,
        duration_s=round(time.monotonic() - started, 1),
    )
    write_report(result, out_dir / scenario.name)
    verdict = "reproduced" if result.reproduced else "NOT reproduced"
    headline = result.headline(scenario.guard.headline)
    progress.done(
        f"{verdict}: {headline.name} {headline.baseline:.3g} → {headline.tuned:.3g} {headline.unit}"
        f" ({result.duration_s:.0f} s) → {out_dir / scenario.name / 'report.md'}"
    )
    return result
