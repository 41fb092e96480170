"""CI's guard of the lab's quarantine-probabilistic finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(300)
async def test_probabilistic_quarantine_calms_the_hot_bookies_inbound_swing(tmp_path: Path) -> None:
    result = await run_quick("quarantine-probabilistic", tmp_path)
    assert result.reproduced, describe(result)
