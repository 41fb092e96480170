"""CI's guard of the lab's shedder-threshold finding (minipulsar/lab/scenarios/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab import describe, run_quick


@pytest.mark.timeout(180)
async def test_threshold_shedder_spreads_load_that_overload_shedder_leaves_in_place(tmp_path: Path) -> None:
    result = await run_quick("shedder-threshold", tmp_path)
    assert result.reproduced, describe(result)
