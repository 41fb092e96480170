"""The lab's bookie-load-aware scenario runs and reports; its finding is not reproduced yet.

On the quick profile (2 brokers, 4 bookies, two per journal disk, EMULATED-HDD) random and
load-aware placement spread journal-disk writes alike (σ within noise of each other), so the
guard is expected to fail; docs/lab/bookie-load-aware/report.md and the issue note say why.
The test still holds the scenario to running end to end without a server ERROR.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(300)
async def test_bookie_load_aware_scenario_runs_and_reports(tmp_path: Path) -> None:
    result = await run_quick("bookie-load-aware", tmp_path)
    assert {h.name for h in result.headlines} >= {"journal-disk write σ (mean over time)", "publish p99, worst second"}
    if not result.reproduced:
        pytest.xfail(f"load-aware placement does not beat random placement here yet: {describe(result)}")
